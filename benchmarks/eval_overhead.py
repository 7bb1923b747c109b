"""lm-eval's overhead per evaluated model against pure generation time (`klrl.evaluation.harness`).

Evaluates a random tiny model on the arith family's three tasks (`--problems` each, `--samples`
per problem, temperature 1, at most `--new-tokens`: a random model never ends early, where
the trained tiny base answers in a few tokens) through `harness.evaluate`, each repetition in a fresh process
so that the import is counted, and prints the harness's own split (import, task load, model
load, generation = time inside the backend's generate_until, the rest of lm-eval's evaluator)
plus the process's whole wall time; medians over repetitions. `--profile FILE` adds one
cProfiled run, saved to FILE, and prints its top lm-eval / klrl functions by cumulative time.

    .venv/bin/python benchmarks/eval_overhead.py [--problems 250] [--samples 4] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import machine, markdown_table, median, random_tiny, verdict

TASKS = ("arith", "arith-long", "arith-word")
PHASES = ("import", "task_load", "model_load", "generation", "evaluate_other", "overhead")


def worker(args) -> None:
    import torch

    from klrl.evaluation.harness import Decoding, evaluate

    torch.set_num_threads(args.threads)
    decoding = Decoding(samples=args.samples, max_new_tokens=args.new_tokens)
    _, timing = evaluate(args.model, list(TASKS), Path(args.data), decoding, limit=args.problems)
    print("RESULT " + json.dumps(timing))


def run_worker(args, model: Path, data: Path, profile: Path | None = None) -> dict:
    prefix = [sys.executable] + (["-m", "cProfile", "-o", str(profile)] if profile else [])
    command = [
        *prefix, __file__, "--worker", "--model", str(model), "--data", str(data), "--problems", str(args.problems),
        "--samples", str(args.samples), "--new-tokens", str(args.new_tokens), "--threads", str(args.threads),
    ]  # fmt: skip
    start = time.perf_counter()
    out = subprocess.run(
        command, capture_output=True, text=True, env=os.environ | {"TOKENIZERS_PARALLELISM": "false"}, check=False
    )
    wall = time.perf_counter() - start
    line = next((line for line in out.stdout.splitlines() if line.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"worker failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return json.loads(line.removeprefix("RESULT ")) | {"process": wall}


def print_profile(path: Path, top: int = 30) -> None:
    import pstats

    print(f"\ncProfile of one run, lm-eval and klrl functions by cumulative time (top {top}):")
    pstats.Stats(str(path)).sort_stats("cumulative").print_stats(
        "lm_eval|klrl|transformers/(generation|modeling_utils)", top
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=250)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=8, help="a random model never stops early: keep it short")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--profile", type=Path, help="save one cProfiled run here and print its top functions")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    from klrl.tasks.data import prepare

    with tempfile.TemporaryDirectory() as tmp:
        model = random_tiny(Path(tmp) / "model")
        for task in TASKS:
            prepare(task, Path(tmp) / "data" / task, seed=0, sizes={"train": 8, "test": args.problems})
        runs = [run_worker(args, model, Path(tmp) / "data") for _ in range(args.reps)]
        if args.profile:
            run_worker(args, model, Path(tmp) / "data", args.profile.resolve())
            print_profile(args.profile)
    print(
        f"{len(TASKS)} tasks × {args.problems} problems × {args.samples} samples, {args.new_tokens} new tokens, {args.threads} thread(s), random 1M tiny model"
    )
    print(f"machine: {machine()}\n")
    keys = (*PHASES, "process")
    print(markdown_table(["", *(f"{k} s" for k in keys)], [["median", *(median([r[k] for r in runs]) for k in keys)]]))
    overhead = median([r["overhead"] for r in runs])
    verdict("lm-eval overhead per evaluated model < 5 s", f"{overhead:.2f} s", overhead < 5.0)


if __name__ == "__main__":
    main()
