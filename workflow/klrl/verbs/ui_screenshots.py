"""`klrl ui-screenshots` (`make readme-screenshots`): the MLflow UI comparing cells' curves, shot
for docs/results.md (klrl.reports.mlflow_screenshots) from a server over the run's store."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "screenshots of the MLflow UI comparing cells' curves, for docs/results.md"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from klrl.reports.mlflow_screenshots import METRIC
    from klrl.tracking.mlflow_ui import DEFAULT_STORE

    parser.add_argument("--experiment", default="study", help="the run's experiment (results/<experiment>/)")
    parser.add_argument("--store", default=DEFAULT_STORE, help="the config's tracking.uri")
    parser.add_argument("--cells", nargs="+", required=True, help="the cells whose runs are compared")
    parser.add_argument("--metric", default=METRIC, help="the curve plotted against the step")
    parser.add_argument("--out", type=Path, default=Path("docs/figures"))


def run(args: argparse.Namespace) -> None:
    from klrl.core.paths import Layout
    from klrl.reports.mlflow_screenshots import capture
    from klrl.tracking.mlflow_process import mlflow_server

    with mlflow_server(args.store, Path.cwd()) as address:
        for shot in capture(
            address, Layout.of({"experiment": args.experiment}).runs_file(), args.cells, args.out, args.metric
        ):
            print(shot)
