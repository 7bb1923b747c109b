"""`klrl prepare-data`: one task's JSONL splits and manifest (klrl.tasks.data), as the workflow's
rule prepare_data runs it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HELP = "write a task's JSONL splits and manifest"


def _json_shots(text: str) -> list[dict]:
    from klrl.tasks.data import check_shots

    try:
        return check_shots(json.loads(text), "--shots")
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not JSON ({error.msg})") from None
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from klrl.tasks import TASKS

    parser.add_argument("--task", required=True, choices=sorted(TASKS), help="task to prepare")
    parser.add_argument("--out", type=Path, required=True, help="folder for <split>.jsonl and manifest.json")
    parser.add_argument("--seed", type=int, default=0, help="seed of generated tasks")
    parser.add_argument("--train-size", type=int, help="rows of the train split (required for generated tasks)")
    parser.add_argument("--test-size", type=int, help="rows of the test split (required for generated tasks)")
    parser.add_argument("--source", choices=("generated", "hub", "fixture"), help="default: the task's own")
    parser.add_argument("--instruction", help="text appended to each problem (default: the task's)")
    parser.add_argument(
        "--shots",
        type=_json_shots,
        default=[],
        help='worked examples before each prompt, JSON: [{"user": ..., "assistant": ...}]',
    )


def run(args: argparse.Namespace) -> None:
    from klrl.tasks import get_task
    from klrl.tasks.data import prepare

    splits = get_task(args.task).splits
    sizes = {
        split: size
        for split, size in (("train", args.train_size), ("test", args.test_size))
        if size and split in splits
    }
    manifest = prepare(
        args.task,
        args.out,
        seed=args.seed,
        sizes=sizes,
        source=args.source,
        instruction=args.instruction,
        shots=args.shots,
    )
    counts = ", ".join(f"{name}: {info['count']}" for name, info in manifest["files"].items())
    print(f"{args.task} → {args.out} ({counts})")
