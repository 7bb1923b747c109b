"""Grading hostile completions: the math reward's wall time per batch (klrl.grading.verify_worker).

Every completion is a distinct power tower `\\boxed{9^{9^{9^{N}}}}` against the reference 81:
math-verify would compute it for hours, so each one costs the per-item timeout (2 s) in a
worker, which is then killed and replaced by a warm fork. Batches:
  32 hostile            one RL step's worth at toy scale, all distinct (no cache help)
  8 hostile             one evaluation problem's samples
  1280, 32 distinct     paper scale (256 prompts × 5): a model that repeats a few hostile answers;
                        after the first 32 the cache answers
  1280 distinct         paper scale, all distinct: the batch deadline (60 s) ends it, the rest
                        score 0 and are counted
The first call also starts the template process (its warm-up, about 3 s, is in the time).

    .venv/bin/python benchmarks/grading.py [--workers 4] [--timeout 2] [--deadline 60]
"""

from __future__ import annotations

import argparse
import itertools
import time

from common import machine, markdown_table, verdict

from klrl.grading import verify_worker
from klrl.grading.rewards import math_reward

_FRESH = itertools.count(3)
KILL_SLACK = 5.0  # seconds past the batch deadline for the last kill and the template warm-up


def hostile(count: int, distinct: int) -> list[str]:
    """`count` hostile completions, `distinct` of them different (never seen before in this process)."""
    towers = [f"\\boxed{{9^{{9^{{9^{{{next(_FRESH)}}}}}}}}}" for _ in range(distinct)]
    return [towers[i % distinct] for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=verify_worker.WORKERS, help="grading worker processes")
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds per item")
    parser.add_argument("--deadline", type=float, default=verify_worker.BATCH_DEADLINE, help="seconds per batch")
    args = parser.parse_args()
    verify_worker.WORKERS = args.workers
    print(machine())
    print(f"workers {args.workers}, timeout {args.timeout} s per item, deadline {args.deadline} s per batch\n")
    rows = []
    for name, count, distinct in [
        ("32 hostile", 32, 32),
        ("8 hostile", 8, 8),
        ("1280, 32 distinct", 1280, 32),
        ("1280 distinct", 1280, 1280),
    ]:
        completions = hostile(count, distinct)
        verify_worker.grading_counts()
        start = time.perf_counter()
        rewards = math_reward(completions, ["81"] * count, timeout=args.timeout, deadline=args.deadline)
        seconds = time.perf_counter() - start
        counts = verify_worker.grading_counts()
        assert rewards == [0.0] * count
        rows.append(
            [
                name,
                count,
                seconds,
                counts["grading/timeouts"],
                counts["grading/cache_hits"],
                counts["grading/deadline_zeroed"],
            ]
        )
        print(
            markdown_table(
                ["batch", "completions", "seconds", "timeouts", "cache hits", "zeroed at deadline"], rows[-1:]
            ).splitlines()[-1],
            flush=True,
        )
    print()
    print(markdown_table(["batch", "completions", "seconds", "timeouts", "cache hits", "zeroed at deadline"], rows))
    slowest = max(row[2] for row in rows)
    bound = args.deadline + KILL_SLACK
    verdict(
        f"every hostile batch within the deadline + {KILL_SLACK:.0f} s ({bound:.0f} s)",
        f"slowest {slowest:.1f} s",
        slowest <= bound,
    )


if __name__ == "__main__":
    main()
