"""Prepared task data on disk: `klrl prepare-data` writes it, the trainer and lm-eval read it.

One folder per task: `<split>.jsonl` (one row per line: id, problem, prompt, answer, meta)
and `manifest.json` (generator, version, seed, source, instruction, and per file the row
count and sha256). `read_split` checks every row and names the file and line of a bad one.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from klrl import __version__
from klrl.files import sha256_file
from klrl.tasks import TASKS, get_task, load_rows

ROW_FIELDS = {"id": str, "problem": str, "prompt": str, "answer": str, "meta": dict}


def _write_jsonl(rows: list[dict], path: Path) -> None:
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    tmp.replace(path)


def prepare(
    task_name: str,
    out_dir: Path,
    *,
    seed: int = 0,
    sizes: dict[str, int] | None = None,
    source: str | None = None,
    instruction: str | None = None,
) -> dict:
    """Write every split of a task and its manifest; returns the manifest."""
    task = get_task(task_name)
    sizes = sizes or {}
    unknown = set(sizes) - set(task.splits)
    if unknown:
        raise ValueError(f"sizes: task {task_name!r} has no split {sorted(unknown)}; its splits: {', '.join(task.splits)}")
    instruction = task.instruction if instruction is None else instruction
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for split in task.splits:
        rows = load_rows(task, split, seed=seed, size=sizes.get(split), source=source)
        rows = [{**row, "prompt": row["problem"] + instruction} for row in rows]
        path = out_dir / f"{split}.jsonl"
        _write_jsonl(rows, path)
        files[path.name] = {"split": split, "count": len(rows), "sha256": sha256_file(path)}
    manifest = {
        "task": task.name,
        "reward": task.reward,
        "generator": task.loader.__module__ + "." + task.loader.__name__,
        "version": __version__,
        "seed": seed,
        "source": source or task.source,
        "instruction": instruction,
        "files": files,
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return manifest


def read_manifest(folder: Path) -> dict:
    """The manifest of a prepared task folder; ValueError if it is missing or not a manifest."""
    path = Path(folder) / "manifest.json"
    if not path.is_file():
        raise ValueError(f"{folder}: no manifest.json; prepare it with `python -m klrl prepare-data`")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error.msg})") from None
    missing = [key for key in ("task", "reward", "files") if key not in manifest]
    if missing:
        raise ValueError(f"{path}: missing key {missing[0]!r}")
    return manifest


def read_split(path: Path) -> list[dict]:
    """Rows of one prepared split, each checked; a bad row raises ValueError naming file:line."""
    rows = []
    with Path(path).open() as handle:
        for line_no, line in enumerate(handle, 1):
            where = f"{path}:{line_no}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{where}: not valid JSON ({error.msg})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{where}: a row must be a JSON object")
            for name, kind in ROW_FIELDS.items():
                if not isinstance(row.get(name), kind):
                    raise ValueError(f"{where}: field {name!r} must be a {kind.__name__}, got {row.get(name)!r:.80}")
            rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no rows")
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", required=True, choices=sorted(TASKS), help="task to prepare")
    parser.add_argument("--out", type=Path, required=True, help="folder for <split>.jsonl and manifest.json")
    parser.add_argument("--seed", type=int, default=0, help="seed of generated tasks")
    parser.add_argument("--train-size", type=int, help="rows of the train split (required for generated tasks)")
    parser.add_argument("--test-size", type=int, help="rows of the test split (required for generated tasks)")
    parser.add_argument("--source", choices=("generated", "hub", "fixture"), help="default: the task's own")
    parser.add_argument("--instruction", help="text appended to each problem (default: the task's)")


def run(args: argparse.Namespace) -> None:
    splits = get_task(args.task).splits
    sizes = {split: size for split, size in (("train", args.train_size), ("test", args.test_size)) if size and split in splits}
    manifest = prepare(
        args.task, args.out, seed=args.seed, sizes=sizes, source=args.source, instruction=args.instruction
    )
    counts = ", ".join(f"{name}: {info['count']}" for name, info in manifest["files"].items())
    print(f"{args.task} → {args.out} ({counts})")
