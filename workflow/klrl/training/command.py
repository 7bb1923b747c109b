"""`klrl train`: one cell, from a YAML config and optional key=value overrides."""

from __future__ import annotations

import argparse
from pathlib import Path

from klrl.training.config import load_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="YAML file of TrainConfig keys")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="override a key")
    parser.add_argument("--out", type=Path, required=True, help="the cell's train folder")
    parser.add_argument("--mlflow-run-id", help="log into this MLflow run (tracking is off without it)")


def run(args: argparse.Namespace) -> None:
    from klrl.training.tracking import Tracker
    from klrl.training.trainer import Trainer

    config = load_config(args.config, args.overrides)
    status_file = args.out / "status.json"
    if status_file.exists():
        print(f"{args.out}: already finished ({status_file.read_text().strip()}); nothing to do")
        return
    status = Trainer(config, args.out, Tracker(args.mlflow_run_id)).run()
    print(f"{args.out}: {status}")
