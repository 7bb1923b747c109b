"""`klrl track-reconcile`: the MLflow runs left RUNNING by jobs that ended (killed) are ended
with the outcome their cell's files record (klrl.tracking.reconcile)."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "end the MLflow runs left RUNNING by jobs that ended (killed)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mlflow-runs", type=Path, required=True, help="the grid's runs file (klrl track-grid); absent: nothing to do"
    )
    parser.add_argument(
        "--root",
        type=Path,
        required=True,
        help="the config's results folder (results/<experiment>), whose cells/<cell>/train/ say how each job ended",
    )


def run(args: argparse.Namespace) -> None:
    from klrl.tracking.reconcile import reconcile

    if not args.mlflow_runs.exists():
        print(f"{args.mlflow_runs}: no runs file yet; nothing to reconcile")
        return
    ended = reconcile(args.mlflow_runs, args.root)
    for key, outcome in ended.items():
        print(f"{key}: was RUNNING, now {outcome}")
    print(f"{args.mlflow_runs}: {len(ended)} runs ended")
