"""`klrl track-files`: files (the figures) attached to a run of the grid's MLflow experiment."""

from __future__ import annotations

import argparse
from pathlib import Path


HELP = "attach files (the figures) to a grid's MLflow run"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mlflow-runs", type=Path, required=True, help="the grid's runs file")
    parser.add_argument(
        "--mlflow-key",
        default="grid",
        help="the run to attach to in --mlflow-runs: the grid's parent run, a cell id or base/<model>",
    )
    parser.add_argument("--artifact-path", default="figures", help="folder in the run's artifacts")
    parser.add_argument("--marker", type=Path, required=True, help="file written when done (the workflow's output)")
    parser.add_argument("files", nargs="+", type=Path, help="files to attach")


def run(args: argparse.Namespace) -> None:
    from klrl.tracking.runs import Tracker

    tracker = Tracker.from_runs_file(args.mlflow_runs, args.mlflow_key)
    for path in args.files:
        tracker.log_artifact(path, args.artifact_path)
    args.marker.write_text("".join(f"{path}\n" for path in args.files))
    print(f"{len(args.files)} files → run {args.mlflow_key!r} ({args.artifact_path}/)")
