"""The grid's MLflow experiment: its name, the tag that opens MLflow's UI on the runs table, the
runs it creates; and the system metrics a training job logs into its run."""

import time

from mlflow.tracking import MlflowClient

from klrl.tracking.experiment import track_grid
from klrl.tracking.runs import Tracker

CELL = "tiny__k1-reward__b0.1__on__s0"


def test_experiment_is_prefixed_and_opens_on_its_runs_table(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    record = track_grid("default", uri, [CELL], tmp_path / "runs.json", {CELL: "on-policy"})
    experiment = client.get_experiment(record["experiment_id"])
    assert experiment.name == "klrl-default"
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    client.set_experiment_tag(experiment.experiment_id, "mlflow.experimentKind", "genai_development")
    again = track_grid("default", uri, [CELL], tmp_path / "runs.json", {CELL: "on-policy"})
    assert again["runs"] == record["runs"]  # the same runs, and the tag set back
    assert client.get_experiment(record["experiment_id"]).tags["mlflow.experimentKind"] == "custom_model_development"


def test_system_metrics_go_into_the_run_while_the_block_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    record = track_grid("default", uri, [CELL], tmp_path / "runs.json", {CELL: "on-policy"})
    tracker = Tracker.from_runs_file(tmp_path / "runs.json", CELL)
    with tracker.system_metrics(interval_s=0.2):
        time.sleep(1.0)
    metrics = MlflowClient(uri).get_run(record["runs"][CELL]).data.metrics
    assert 0 <= metrics["system/cpu_utilization_percentage"] <= 100
    assert metrics["system/system_memory_usage_megabytes"] > 0
