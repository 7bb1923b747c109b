"""Where the MLflow UI shows a config's runs: the address of its experiment's runs table (MLflow 3
opens on a GenAI overview otherwise, whatever the experiment's kind tag says). `klrl ui` serves the
store and prints it."""

from __future__ import annotations

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
