"""`klrl aggregate`: every cell's results collected into the run's tables (klrl.analysis.tables),
which go to the grid's MLflow run when tracking is on."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "collect every cell's results into tables"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cells", nargs="+", required=True, help="cell ids")
    parser.add_argument(
        "--root",
        type=Path,
        required=True,
        help="the config's results folder (results/<experiment>): cells/, base/, toy/",
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for the tables")
    parser.add_argument("--scale", default="toy", help="what the paper-comparison table says of this grid's scale")
    parser.add_argument("--mlflow-runs", type=Path, help="the grid's runs file: tables go to its parent run")


def run(args: argparse.Namespace) -> None:
    from klrl.analysis.tables import aggregate
    from klrl.tracking.runs import Tracker

    tables = aggregate(args.cells, args.out, args.root, scale=args.scale)
    if args.mlflow_runs:
        grid = Tracker.from_runs_file(args.mlflow_runs, "grid")
        grid.log_artifact(args.out, None)
        grid.finish()
    counts = tables["scores"].drop_duplicates("cell")["status"].value_counts().to_dict()
    print(f"{args.out}: {len(tables['main'])} configuration × task rows; cells by status {counts}")
