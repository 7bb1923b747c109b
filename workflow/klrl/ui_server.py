"""`klrl ui` (`make ui`): serves a config's MLflow store for a person (klrl.tracking.mlflow_process)
and prints the address of its experiment's runs table (MLflow 3 opens on a GenAI overview
otherwise, whatever the experiment's kind tag says)."""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

from klrl.tracking.mlflow_process import mlflow_server, stop_on_signals


DEFAULT_STORE = "sqlite:///results/mlflow.db"  # the config schema's default tracking.uri


def runs_table(address: str, store_uri: str, experiment: str) -> str:
    """The UI address of the runs table of a config's `experiment` (klrl-<experiment>) in the store."""
    from mlflow.tracking import MlflowClient

    from klrl.tracking.experiment import mlflow_experiment_name

    name = mlflow_experiment_name(experiment)
    found = MlflowClient(store_uri).get_experiment_by_name(name)
    if found is None:
        raise ValueError(f"{store_uri}: no experiment {name!r} yet (run the grid first: make run)")
    return f"{address}/#/experiments/{found.experiment_id}/runs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", type=Path, default=Path("config/config.yaml"), help="the workflow config whose runs to show"
    )
    parser.add_argument("--port", type=int, default=5000)


def run(args: argparse.Namespace) -> None:
    from klrl.files import read_yaml

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
