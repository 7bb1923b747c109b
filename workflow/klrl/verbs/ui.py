"""`klrl ui` (`make ui`): serves a config's MLflow store for a person (klrl.tracking.mlflow_process)
and prints the address of its experiment's runs table (klrl.tracking.mlflow_ui: MLflow 3 opens on
a GenAI overview otherwise, whatever the experiment's kind tag says)."""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

HELP = "serve a config's MLflow store and print the address of its runs table"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", type=Path, default=Path("config/config.yaml"), help="the workflow config whose runs to show"
    )
    parser.add_argument("--port", type=int, default=5000)


def run(args: argparse.Namespace) -> None:
    from klrl.core.files import read_yaml
    from klrl.tracking.mlflow_process import mlflow_server, stop_on_signals
    from klrl.tracking.mlflow_ui import DEFAULT_STORE, runs_table

    config = read_yaml(args.config)
    tracking = config.get("tracking") or {}
    if not tracking.get("enabled", True):
        raise ValueError(f"{args.config}: tracking is off (tracking.enabled: false), there is nothing to show")
    store = os.environ.get("MLFLOW_TRACKING_URI") or tracking.get("uri", DEFAULT_STORE)
    if store.startswith(("http://", "https://")):  # a tracking server serves its own UI
        print(f"MLflow UI: {runs_table(store.rstrip('/'), store, config['experiment'])}", flush=True)
        return
    if store.startswith("sqlite:///") and not Path(store.removeprefix("sqlite:///")).exists():
        raise ValueError(f"{store}: no store yet (run the grid first: make run)")
    url = runs_table(f"http://127.0.0.1:{args.port}", store, config["experiment"])
    stop_on_signals()
    with mlflow_server(store, Path.cwd(), port=args.port):
        print(f"MLflow UI: {url} (the runs of {config['experiment']}; Ctrl-C stops it)", flush=True)
        signal.pause()
