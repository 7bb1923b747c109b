"""Where a cell's numbers go: `metrics.jsonl` (the record), MLflow (a mirror), status.json.

`MetricsLog` appends one JSON line per step and, on resume, drops the lines of steps the
checkpoint does not cover, so a resumed history equals an uninterrupted one. `Tracker` is
MLflow when a run id is given and a no-op otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
from contextlib import contextmanager
from pathlib import Path


class MetricsLog:
    def __init__(self, path: Path, keep_steps_below: int) -> None:
        self.path = Path(path)
        kept = []
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                if line.strip() and json.loads(line)["step"] < keep_steps_below:
                    kept.append(line + "\n")
        self.path.write_text("".join(kept))

    def append(self, record: dict) -> None:
        with self.path.open("a") as handle:
            handle.write(json.dumps(record, sort_keys=True, allow_nan=True) + "\n")


def read_metrics(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


class Tracker:
    """MLflow logging into an existing run (the workflow creates it), or nothing at all."""

    def __init__(self, run_id: str | None = None, tracking_uri: str | None = None) -> None:
        self.run_id = run_id
        self.tracking_uri = tracking_uri
        self._client = None
        if run_id:
            from mlflow.tracking import MlflowClient

            self._client = MlflowClient(tracking_uri)

    @classmethod
    def from_runs_file(cls, path: Path, key: str) -> Tracker:
        """The run `key` (a cell id, or `base/<model>`) of a grid's runs file (`klrl track-grid`);
        a no-op tracker when the file says tracking is off."""
        runs = json.loads(Path(path).read_text())
        if not runs["tracking_uri"]:
            return cls()
        if key not in runs["runs"]:
            raise ValueError(f"{path}: no MLflow run for {key!r}; re-run `klrl track-grid` (the grid changed?)")
        return cls(runs["runs"][key], runs["tracking_uri"])

    def log_params(self, params: dict) -> None:
        if self._client:
            from mlflow.entities import Param

            self._client.log_batch(self.run_id, params=[Param(key, str(value)) for key, value in params.items()])

    def log_metrics(self, metrics: dict, step: int) -> None:
        if self._client:
            from mlflow.entities import Metric

            finite = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and math.isfinite(v)}
            batch = [Metric(key.replace("@", "_at_"), value, 0, step) for key, value in finite.items()]
            self._client.log_batch(self.run_id, metrics=batch)

    @contextmanager
    def system_metrics(self, interval_s: float = 10.0):
        """MLflow's system metrics of this machine (`system/cpu_utilization_percentage`, memory,
        disk, network and, with pynvml, GPU) every `interval_s` seconds while the block runs, into
        this run; nothing when tracking is off. The sampling thread stops by itself when the run
        is no longer RUNNING."""
        if not self._client:
            yield
            return
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        monitor = SystemMetricsMonitor(self.run_id, sampling_interval=interval_s, resume_logging=True, tracking_uri=self.tracking_uri)
        monitor.start()
        try:
            yield
        finally:
            monitor.finish()

    def set_tag(self, key: str, value: str) -> None:
        if self._client:
            self._client.set_tag(self.run_id, key, value)

    def finish(self, failed: bool = False) -> None:
        """Mark the run FINISHED (or FAILED); later jobs may still log into it."""
        if self._client:
            self._client.set_terminated(self.run_id, "FAILED" if failed else "FINISHED")

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        """A file, or a folder and everything in it, under `artifact_path` in the run."""
        if self._client:
            if Path(path).is_dir():
                folder = f"{artifact_path}/{Path(path).name}" if artifact_path else Path(path).name
                self._client.log_artifacts(self.run_id, str(path), folder)
            else:
                self._client.log_artifact(self.run_id, str(path), artifact_path)


def add_tracking_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mlflow-run-id", help="log into this MLflow run (MLFLOW_TRACKING_URI names the store)")
    parser.add_argument("--mlflow-runs", type=Path, help="a grid's runs file (klrl track-grid); with --mlflow-key")
    parser.add_argument("--mlflow-key", help="this job's run in --mlflow-runs: a cell id or base/<model>")


def tracker_from_args(args: argparse.Namespace) -> Tracker:
    """The tracker the tracking arguments name; tracking is off without any."""
    if args.mlflow_runs:
        if not args.mlflow_key:
            raise ValueError("--mlflow-runs needs --mlflow-key (the cell id, or base/<model>)")
        return Tracker.from_runs_file(args.mlflow_runs, args.mlflow_key)
    return Tracker(args.mlflow_run_id)


def write_status(folder: Path, status: str, step: int, reason: str = "") -> None:
    record = {"status": status, "step": step, "reason": reason}
    (Path(folder) / "status.json").write_text(json.dumps(record, indent=2) + "\n")
