"""`klrl train`: one cell, from a YAML config and optional key=value overrides.

Run it with `python -m klrl train`, or with `torchrun --nproc_per_node W -m klrl train` for
W data-parallel processes (klrl.training.distributed)."""

from __future__ import annotations

import argparse
from contextlib import nullcontext
from pathlib import Path

from klrl.training.config import config_keys_help, load_config
from klrl.training.tracking import add_tracking_arguments, tracker_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = config_keys_help()
    parser.add_argument("--config", type=Path, help="YAML file of TrainConfig keys (listed below)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="override a key (listed below)")
    parser.add_argument("--out", type=Path, required=True, help="the cell's train folder")
    add_tracking_arguments(parser)


def run(args: argparse.Namespace) -> None:
    from klrl.training import distributed
    from klrl.training.trainer import Trainer

    config = load_config(args.config, args.overrides)
    status_file = args.out / "status.json"
    if status_file.exists():
        print(f"{args.out}: already finished ({status_file.read_text().strip()}); nothing to do")
        return
    try:
        tracker = tracker_from_args(args)
        trainer = Trainer(config, args.out, tracker)
        with tracker.system_metrics() if trainer.procs.is_main else nullcontext():
            status = trainer.run()
    finally:
        distributed.teardown()
    if trainer.procs.is_main:
        print(f"{args.out}: {status}")
