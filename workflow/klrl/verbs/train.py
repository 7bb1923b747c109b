"""`klrl train`: one cell, from a YAML config and optional key=value overrides.

Run it with `python -m klrl train`, or with `torchrun --nproc_per_node W -m klrl train` for
W data-parallel processes (klrl.training.distributed). One process at a time may train a cell:
the main process holds `<out>/train.lock` (klrl.core.folder_lock) from start to end, so a second
command on the same folder is refused with the holder's pid and host. A cell whose status.json
is valid (klrl.training.record.read_status) is finished and is not trained again, unless its
configuration changed: then a new attempt starts, with its own MLflow run (klrl.training.attempt, klrl.tracking.attempt_runs)."""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path

HELP = "RL-train one cell (on- or off-policy, any KL configuration)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from klrl.tracking.attempt_runs import add_tracking_arguments
    from klrl.training.config import config_keys_help

    parser.epilog = config_keys_help()
    parser.add_argument("--config", type=Path, help="YAML file of TrainConfig keys (listed below)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a key (listed below)",
    )
    parser.add_argument("--out", type=Path, required=True, help="the cell's train folder")
    add_tracking_arguments(parser)


def run(args: argparse.Namespace) -> None:
    from klrl.core.folder_lock import hold_lock
    from klrl.core.paths import TRAIN_LOCK
    from klrl.tracking.attempt_runs import attempt_tracker, tracker_from_args
    from klrl.training import distributed
    from klrl.training.attempt import begin_attempt
    from klrl.training.checkpoint import remove_checkpoints
    from klrl.training.config import load_config
    from klrl.training.record import read_status
    from klrl.training.trainer import Trainer

    config = load_config(args.config, args.overrides)
    main = os.environ.get("RANK", "0") == "0"  # under torchrun, rank 0 holds the lock for all
    lock = hold_lock(args.out / TRAIN_LOCK, f"cell {args.out}") if main else contextlib.nullcontext()
    with lock:
        # rank 0 alone moves files; the others wait for it in the process group's rendezvous (Trainer)
        superseded = begin_attempt(args.out, config) if main else None
        if superseded:
            print(f"{args.out}: the configuration changed; the previous attempt's files are in {superseded}")
        status = read_status(args.out)
        if status is not None:
            remove_checkpoints(args.out)  # left behind by a kill right after status.json
            print(f"{args.out}: already finished ({status['status']} at step {status['step']}); nothing to do")
            return
        trainer = None
        try:
            if not main:
                tracker = None  # rank 0 alone logs (Trainer); the others need no MLflow client, nor its import
            elif args.mlflow_runs and args.mlflow_key:
                tracker = attempt_tracker(args.out, config, args.mlflow_runs, args.mlflow_key)
            else:
                tracker = tracker_from_args(args)
            trainer = Trainer(config, args.out, tracker)
            with tracker.system_metrics() if trainer.procs.is_main else contextlib.nullcontext():
                status = trainer.run()
        finally:
            if trainer is not None:
                trainer.close()  # a vLLM engine leaves before the process group it joined
            distributed.teardown()
    if trainer.procs.is_main:
        print(f"{args.out}: {status} ({trainer.procs.world} processes, mixed precision {config.mixed_precision})")
