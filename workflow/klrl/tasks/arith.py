"""The embedded default task family: integer arithmetic, generated offline from a seed.

The toy-scale analogue of MATH (in-domain) against MMLU science (out-of-domain):
    arith       a + b or a − b, a of one or two digits, b of one (a ≥ b for −): RL trains on it;
    arith-long  the same with a three-digit a: longer inputs and outputs than RL sees, with
                carries and borrows that cross two digits;
    arith-word  the in-domain sums and differences posed as word problems: a different
                format, where the operation must be read from the words (beyond the tiny base).
    arith-spoken, arith-long-spoken
                arith and arith-long asked in words ("What is 24 minus 3?"), with the same
                problems, answers and held-out partition: the phrasing on which a small
                pretrained chat model (SmolLM2-135M-Instruct) can do the sums at all, and the
                tiny base's out-of-domain format (in its corpus, never in its RL).
Answers are integers, written `\\boxed{N}` and graded by `klrl.grading.rewards.arithmetic_reward`.

Held-out problems: every (a, op, b) is assigned to 'test' or not by a hash, the same for
every seed, so test problems never appear in the RL training set or in the tiny base
model's pretraining corpus (`pretraining_example`).
"""

from __future__ import annotations

import hashlib
import random

FAMILY = ("arith", "arith-long", "arith-word", "arith-spoken", "arith-long-spoken")
SPOKEN_OPERATORS = {"+": "plus", "-": "minus"}
TEST_FRACTION = 0.15

_NAMES = ("Ann", "Ben", "Cal", "Dee", "Eve", "Max", "Sam", "Zoe")
_THINGS = ("apples", "books", "coins", "pens", "cards", "shells", "stamps", "beads")
_ADD_TEMPLATES = (
    "{name} has {a} {thing} and gets {b} more. How many {thing} now?",
    "{name} had {a} {thing}. A friend gave {b} more. How many {thing}?",
    "A box holds {a} {thing}. {name} adds {b}. How many {thing} in the box?",
)
_SUB_TEMPLATES = (
    "{name} has {a} {thing} and gives away {b}. How many {thing} are left?",
    "{name} had {a} {thing} and lost {b}. How many {thing} now?",
    "A box holds {a} {thing}. {name} takes {b} out. How many {thing} in the box?",
)


def _operand_ranges(task: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """(low, high) of a and of b."""
    return ((100, 999) if task.startswith("arith-long") else (0, 99)), (0, 9)


def is_test_problem(a: int, op: str, b: int) -> bool:
    """The fixed held-out partition: about TEST_FRACTION of all problems, seed-independent."""
    digest = hashlib.sha256(f"{a}{op}{b}".encode()).digest()
    return int.from_bytes(digest[:4], "big") < TEST_FRACTION * 2**32


def _draw(task: str, rng: random.Random, want_test: bool) -> tuple[int, str, int]:
    (a_low, a_high), (b_low, b_high) = _operand_ranges(task)
    while True:
        a, b, op = rng.randint(a_low, a_high), rng.randint(b_low, b_high), rng.choice("+-")
        if (op == "+" or a >= b) and is_test_problem(a, op, b) == want_test:
            return a, op, b


def _problem_text(task: str, a: int, op: str, b: int, rng: random.Random) -> str:
    if task.endswith("-spoken"):
        return f"What is {a} {SPOKEN_OPERATORS[op]} {b}?"
    if task != "arith-word":
        return f"{a}{op}{b}"
    template = rng.choice(_ADD_TEMPLATES if op == "+" else _SUB_TEMPLATES)
    return template.format(name=rng.choice(_NAMES), thing=rng.choice(_THINGS), a=a, b=b)


def space_size(task: str, split: str) -> int:
    """How many distinct problems the task's split holds."""
    (a_low, a_high), (b_low, b_high) = _operand_ranges(task)
    return sum(
        is_test_problem(a, op, b) == (split == "test")
        for a in range(a_low, a_high + 1)
        for b in range(b_low, b_high + 1)
        for op in "+-"
        if op == "+" or a >= b
    )


def generate(task: str, split: str, size: int, seed: int) -> list[dict]:
    """`size` distinct problems of one task and split, deterministic for (task, split, seed)."""
    if task not in FAMILY:
        raise ValueError(f"arithmetic task: {task!r} is not one of {', '.join(FAMILY)}")
    if split not in ("train", "test"):
        raise ValueError(f"split: {split!r} is not one of train, test")
    if size > space_size(task, split):
        raise ValueError(f"size: {size} exceeds the {space_size(task, split)} distinct {task} {split} problems")
    rng = random.Random(f"{task.removesuffix('-spoken')}/{split}/{seed}")  # spoken: the same problems
    rows, seen = [], set()
    while len(rows) < size:
        a, op, b = _draw(task, rng, want_test=split == "test")
        if (a, op, b) in seen:
            continue
        seen.add((a, op, b))
        answer = a + b if op == "+" else a - b
        problem = _problem_text(task, a, op, b, rng)
        meta = {"a": a, "op": op, "b": b}
        rows.append({"id": f"{task}-{split}-{len(rows):05d}", "problem": problem, "answer": str(answer), "meta": meta})
    return rows


def corrupt(answer: int, rng: random.Random) -> int:
    """The answer with one digit replaced by a different random digit (never a leading zero)."""
    digits = list(str(answer))
    position = rng.randrange(len(digits))
    choices = [
        d for d in "0123456789" if d != digits[position] and not (position == 0 and d == "0" and len(digits) > 1)
    ]
    digits[position] = rng.choice(choices)
    return int("".join(digits))


def pretraining_example(task: str, rng: random.Random, corrupt_prob: float) -> tuple[str, str]:
    """One (problem, answer) pair of the base model's corpus, never a test problem.

    With probability `corrupt_prob` the answer has one wrong digit: the model learns the skill
    (the right digit stays the most likely one) but samples wrong answers often.
    """
    a, op, b = _draw(task, rng, want_test=False)
    answer = a + b if op == "+" else a - b
    if rng.random() < corrupt_prob:
        answer = corrupt(answer, rng)
    return _problem_text(task, a, op, b, rng), str(answer)
