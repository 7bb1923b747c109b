"""The embedded default task family: integer arithmetic, generated offline from a seed.

The toy-scale analogue of MATH (in-domain) against MMLU science (out-of-domain):
    arith       a + b or a − b with 0 ≤ a, b ≤ 99 (a ≥ b for −): RL trains on it;
    arith-long  the same with three-digit operands: longer inputs and outputs than RL sees;
    arith-word  two-digit sums and differences posed as word problems: a different format,
                where the operation must be read from the words.
Answers are integers, written `\\boxed{N}` and graded by `klrl.rewards.arithmetic_reward`.

Held-out problems: every (a, op, b) is assigned to 'test' or not by a hash, the same for
every seed, so test problems never appear in the RL training set or in the tiny base
model's pretraining corpus (`pretraining_text`).
"""

from __future__ import annotations

import hashlib
import random

FAMILY = ("arith", "arith-long", "arith-word")
TEST_FRACTION = 0.1

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


def _operand_range(task: str) -> tuple[int, int]:
    return (100, 999) if task == "arith-long" else (0, 99)


def is_test_problem(a: int, op: str, b: int) -> bool:
    """The fixed held-out partition: about TEST_FRACTION of all problems, seed-independent."""
    digest = hashlib.sha256(f"{a}{op}{b}".encode()).digest()
    return int.from_bytes(digest[:4], "big") < TEST_FRACTION * 2**32


def _draw(task: str, rng: random.Random, want_test: bool) -> tuple[int, str, int]:
    low, high = _operand_range(task)
    while True:
        a, b, op = rng.randint(low, high), rng.randint(low, high), rng.choice("+-")
        if op == "-" and b > a:
            a, b = b, a
        if is_test_problem(a, op, b) == want_test:
            return a, op, b


def _problem_text(task: str, a: int, op: str, b: int, rng: random.Random) -> str:
    if task != "arith-word":
        width = len(str(_operand_range(task)[1]))
        return f"{a:0{width}d}{op}{b:0{width}d}"
    template = rng.choice(_ADD_TEMPLATES if op == "+" else _SUB_TEMPLATES)
    return template.format(name=rng.choice(_NAMES), thing=rng.choice(_THINGS), a=a, b=b)


def generate(task: str, split: str, size: int, seed: int) -> list[dict]:
    """`size` distinct problems of one task and split, deterministic for (task, split, seed)."""
    if task not in FAMILY:
        raise ValueError(f"arithmetic task: {task!r} is not one of {', '.join(FAMILY)}")
    if split not in ("train", "test"):
        raise ValueError(f"split: {split!r} is not one of train, test")
    rng = random.Random(f"{task}/{split}/{seed}")
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
    choices = [d for d in "0123456789" if d != digits[position] and not (position == 0 and d == "0" and len(digits) > 1)]
    digits[position] = rng.choice(choices)
    return int("".join(digits))


def pretraining_text(rng: random.Random, corrupt_prob: float, mix: dict[str, float]) -> tuple[str, str]:
    """One (problem, answer) pair of the base model's corpus, never a test problem.

    With probability `corrupt_prob` the answer has one wrong digit: the model learns the skill
    (the right digit stays the most likely one) but samples wrong answers often.
    """
    task = rng.choices(list(mix), weights=list(mix.values()))[0]
    a, op, b = _draw(task, rng, want_test=False)
    answer = a + b if op == "+" else a - b
    if rng.random() < corrupt_prob:
        answer = corrupt(answer, rng)
    return _problem_text(task, a, op, b, rng), str(answer)
