"""`klrl track-grid`: a grid's MLflow experiment and its runs, created once before its jobs
(klrl.tracking.experiment), and the runs file the jobs read."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

HELP = "create a grid's MLflow experiment and runs, once, before its jobs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--experiment", required=True, help="the config's experiment; its MLflow experiment is klrl-<experiment>"
    )
    parser.add_argument("--uri", default="", help="tracking store when MLFLOW_TRACKING_URI is unset; '' with --off")
    parser.add_argument("--off", action="store_true", help="tracking off: write a runs file that disables it")
    parser.add_argument(
        "--credentials",
        default="",
        help="the tracking server's credentials file when KLRL_TRACKING_CREDENTIALS is unset (its path, never a password)",
    )
    parser.add_argument("--cells", nargs="*", default=[], metavar="GROUP:CELL", help="cells, each as group:cell-id")
    parser.add_argument("--bases", nargs="*", default=[], metavar="MODEL", help="base models evaluated")
    parser.add_argument("--out", type=Path, required=True, help="the runs file to write")


def run(args: argparse.Namespace) -> None:
    from klrl.grid.config_check import tracking_uri_problem
    from klrl.tracking.credentials import credentials_path, server_problem
    from klrl.tracking.experiment import mlflow_experiment_name, track_grid

    uri = None if args.off else os.environ.get("MLFLOW_TRACKING_URI") or args.uri
    credentials = credentials_path(args.credentials) if uri else None
    if uri and (problem := tracking_uri_problem(uri) or server_problem(uri, credentials)):
        raise ValueError(problem)
    groups = {cell: group for group, cell in (item.split(":", 1) for item in args.cells)}
    keys = list(groups) + [f"base/{model}" for model in args.bases]
    record = track_grid(args.experiment, uri, keys, args.out, groups, credentials)
    where = record["tracking_uri"] or "off"
    print(f"{args.out}: {len(record['runs'])} runs in experiment {mlflow_experiment_name(args.experiment)!r} ({where})")
