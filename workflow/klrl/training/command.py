"""`klrl train`: one cell, from a YAML config and optional key=value overrides."""

from __future__ import annotations

import argparse
from pathlib import Path

from klrl.training.config import load_config
from klrl.training.tracking import add_tracking_arguments, tracker_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="YAML file of TrainConfig keys")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="override a key")
    parser.add_argument("--out", type=Path, required=True, help="the cell's train folder")
    add_tracking_arguments(parser)


def run(args: argparse.Namespace) -> None:
    from klrl.training.trainer import Trainer

    config = load_config(args.config, args.overrides)
    status_file = args.out / "status.json"
    if status_file.exists():
        print(f"{args.out}: already finished ({status_file.read_text().strip()}); nothing to do")
        return
    status = Trainer(config, args.out, tracker_from_args(args)).run()
    print(f"{args.out}: {status}")
