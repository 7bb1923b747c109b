"""Tasks: training prompts, evaluation sets, a prompt template and a reward, by name.

A task's rows are dicts {"id", "problem", "answer", "meta"}; `load_rows` returns them for one
split, and `klrl.tasks.data` writes them as JSONL with the prompt (problem + instruction) that
the trainer and lm-eval both read. The reward is named, and looked up in `klrl.grading.rewards`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from klrl.tasks.math import TEST_HUB as MATH_TEST_HUB
from klrl.tasks.math import TRAIN_HUB as MATH_TRAIN_HUB
from klrl.tasks.mmlu import HUB as MMLU_HUB

# The paper's MATH instruction (docs/paper.md), appended to the problem.
MATH_INSTRUCTION = " Place your answer at end exactly inside latex box for example \\boxed{12} or \\boxed{51}."
# MMLU questions are answered by a letter: the MATH instruction's numeric examples would ask for a
# number, so the letter questions get the same request with a letter example.
MMLU_INSTRUCTION = " Place the letter of your answer at end exactly inside latex box for example \\boxed{B}."


def _load_arith(name: str, split: str, seed: int, size: int | None, source: str) -> list[dict]:
    from klrl.tasks.arith import generate

    return generate(name, split, size, seed)


def _arith_space(name: str, split: str) -> int:
    from klrl.tasks.arith import space_size

    return space_size(name, split)


def _load_countdown(name: str, split: str, seed: int, size: int | None, source: str) -> list[dict]:
    from klrl.tasks.countdown import load_countdown

    return load_countdown(size, seed, split)


def _load_math(name: str, split: str, seed: int, size: int | None, source: str) -> list[dict]:
    from klrl.tasks.math import load_math

    return load_math(split, source)


def _load_mmlu(name: str, split: str, seed: int, size: int | None, source: str) -> list[dict]:
    from klrl.tasks.mmlu import load_mmlu

    return load_mmlu(name.removeprefix("mmlu-").replace("-", "_"), source)


@dataclass(frozen=True)
class Task:
    name: str
    reward: str  # a key of klrl.grading.rewards.REWARDS
    splits: tuple[str, ...]
    instruction: str  # appended to the problem to make the prompt (before any chat template)
    source: str  # where rows come from by default: generated offline, or the Hugging Face Hub
    description: str
    loader: Callable[[str, str, int, int | None, str], list[dict]]
    distinct: Callable[[str, str], int] | None = None  # (task, split) → how many distinct rows it can generate
    hub: tuple[str, ...] = ()  # the Hub data sets it reads, where its source is the Hub


def _arith(name: str, description: str) -> Task:
    return Task(name, "arithmetic", ("train", "test"), "", "generated", description, _load_arith, _arith_space)


def _mmlu(subject: str) -> Task:
    label = subject.replace("_", " ")
    name = f"mmlu-{subject.replace('_', '-')}"
    description = f"out-of-domain (paper): MMLU {label}, boxed letter"
    return Task(name, "math", ("test",), MMLU_INSTRUCTION, "hub", description, _load_mmlu, hub=(MMLU_HUB,))


TASKS = {
    task.name: task
    for task in (
        _arith("arith", "in-domain (default): two-digit sums and differences"),
        _arith("arith-long", "out-of-domain (default): three-digit operands"),
        _arith("arith-word", "word problems (the tiny base cannot read them)"),
        _arith("arith-spoken", "arith asked in words: out-of-domain (default), in-domain (SmolLM2 study)"),
        _arith("arith-long-spoken", "out-of-domain (SmolLM2 study): arith-long asked in words"),
        Task(
            "math",
            "math",
            ("train", "test"),
            MATH_INSTRUCTION,
            "hub",
            "in-domain (paper): MATH, MATH-500",
            _load_math,
            hub=(MATH_TRAIN_HUB, MATH_TEST_HUB),
        ),
        _mmlu("college_physics"),
        _mmlu("college_chemistry"),
        _mmlu("college_biology"),
        Task(
            "countdown",
            "countdown",
            ("train", "test"),
            "",
            "generated",
            "Countdown (paper), reasoning-gym",
            _load_countdown,
        ),
    )
}


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known tasks: {', '.join(TASKS)}")
    return TASKS[name]


def load_rows(
    task: Task, split: str, *, seed: int = 0, size: int | None = None, source: str | None = None
) -> list[dict]:
    """The rows of one split. `size` is required for generated tasks and caps the others."""
    source = source or task.source
    if split not in task.splits:
        raise ValueError(f"task {task.name!r} has no split {split!r}; its splits: {', '.join(task.splits)}")
    allowed = ("generated",) if task.source == "generated" else ("hub", "fixture")
    if source not in allowed:
        raise ValueError(f"source: {source!r} is not one of {', '.join(allowed)} for task {task.name!r}")
    if task.source == "generated" and size is None:
        raise ValueError(f"task {task.name!r} is generated: give the number of rows (size)")
    rows = task.loader(task.name, split, seed, size, source)
    return rows if size is None else rows[:size]
