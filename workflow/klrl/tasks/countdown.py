r"""The paper's second RL task: Countdown, generated offline by reasoning-gym's "countdown" dataset.

A problem gives 4-6 numbers in 1..100 and a target in 100..999 (reasoning-gym's defaults, as the
paper's settings for Qwen3-4B are unknown; all are parameters): write an arithmetic expression
that uses every number exactly once and equals the target. reasoning-gym's question is kept, but
its closing instruction "5. Do not include any other text or formatting." is replaced by a request
for the final expression inside \boxed{} (and its "a arithmetic" typo fixed). The reference
answer is the JSON string {"numbers": [...], "target": N} (numbers in the order posed), which the
countdown reward parses; meta keeps reasoning-gym's own solution and the config used.

Splits never overlap. reasoning-gym draws entry i from Random(config.seed + i); each split's
config seed is a 64-bit hash of (seed, split), so the seed ranges of the splits, and of different
`seed`s, are disjoint but for a chance of about size / 2**64. (Plain offsets such as seed * 2**33
would not do: Python seeds its Mersenne Twister from the 32-bit words of the integer, and the words
[a, b] give the same state as [a] when b + 1 == a, so Random(2**32 + 2) == Random(2).) On top of
that, a test problem whose (sorted numbers, target) also appears among the first `train_size`
train problems (default: `size`) is dropped, so the test split can come out shorter than `size`.
reasoning-gym solves each problem with sympy: expect tens of milliseconds per problem.
"""

from __future__ import annotations

import hashlib
import json

SPLITS = ("train", "test")
_RG_INSTRUCTIONS = (
    "\n\nFinal answer format instructions:\n"
    "1. Provide your solution as a arithmetic expression (no '=' sign).\n"
    "2. Do not include the target number in the expression.\n"
    "3. Use '*' for multiplication.\n"
    "4. Use '/' for division.\n"
    "5. Do not include any other text or formatting.\n"
)
INSTRUCTIONS = (
    "\n\nFinal answer format instructions:\n"
    "1. Provide your solution as an arithmetic expression (no '=' sign).\n"
    "2. Do not include the target number in the expression.\n"
    "3. Use '*' for multiplication.\n"
    "4. Use '/' for division.\n"
    "5. Put the final expression inside \\boxed{}, for example \\boxed{(1 + 2) * 3}."
)


def split_seed(seed: int, split: str) -> int:
    """The reasoning-gym seed of one split: a 64-bit hash of (seed, split)."""
    return int.from_bytes(hashlib.sha256(f"klrl-countdown/{seed}/{split}".encode()).digest()[:8], "big")


def _generate(config: dict, split: str) -> list[dict]:
    import reasoning_gym

    rows = []
    for entry in reasoning_gym.create_dataset("countdown", **config):
        question, meta = entry["question"], entry["metadata"]
        if not question.endswith(_RG_INSTRUCTIONS):
            raise ValueError(f"reasoning-gym countdown entry {meta['source_index']}: unexpected question {question!r}")
        problem = question.removesuffix(_RG_INSTRUCTIONS) + INSTRUCTIONS
        answer = json.dumps({"numbers": meta["numbers"], "target": meta["target"]})
        index = meta["source_index"]
        row_meta = {"config": dict(config), "source_index": index, "solution": entry["answer"]}
        row_id = f"countdown/{split}/{config['seed']}/{index}"
        rows.append({"id": row_id, "problem": problem, "answer": answer, "meta": row_meta})
    return rows


def problem_key(row: dict) -> tuple:
    """What makes two Countdown problems the same: their sorted numbers and target."""
    answer = json.loads(row["answer"])
    return tuple(sorted(answer["numbers"])), answer["target"]


def load_countdown(
    size: int,
    seed: int,
    split: str,
    *,
    train_size: int | None = None,
    min_numbers: int = 4,
    max_numbers: int = 6,
    min_value: int = 1,
    max_value: int = 100,
    min_target: int = 100,
    max_target: int = 999,
) -> list[dict]:
    """`size` Countdown rows of `split` ("train"/"test") deterministic in `seed`; see the module doc."""
    if split not in SPLITS:
        raise ValueError(f"countdown split {split!r} is not one of train, test")
    if not isinstance(seed, int):
        raise ValueError(f"countdown seed {seed!r} is not an integer")
    if not isinstance(size, int) or size < 1:
        raise ValueError(f"countdown size {size!r} is not a positive integer")
    config = {
        "min_numbers": min_numbers,
        "max_numbers": max_numbers,
        "min_value": min_value,
        "max_value": max_value,
        "min_target": min_target,
        "max_target": max_target,
        "seed": split_seed(seed, split),
        "size": size,
    }
    rows = _generate(config, split)
    if split == "test":
        train_config = {**config, "seed": split_seed(seed, "train"), "size": size if train_size is None else train_size}
        seen = {problem_key(row) for row in _generate(train_config, "train")}
        rows = [row for row in rows if problem_key(row) not in seen]
    return rows
