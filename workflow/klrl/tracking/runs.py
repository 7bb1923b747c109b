"""Where a cell's numbers go: `metrics.jsonl` (the record), MLflow (a mirror), status.json.

`MetricsLog` appends one JSON line per step and, on resume, cuts off the lines of steps the
checkpoint does not cover (and a torn last line), so a resumed history equals an uninterrupted
one. status.json is written atomically, last, and read back validated (`read_status`). `Tracker` is
MLflow when a run id is given and a no-op otherwise; a cell's jobs log into the run of the cell's
current attempt (klrl.training.attempt), recorded in its train folder.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

from klrl.files import read_jsonl, write_atomic
from klrl.paths import FINAL, STATUS


class MetricsLog:
    """metrics.jsonl, append-only: each record is one line written whole with a single write.

    On resume the file is cut back (truncated in place, never rewritten) to the records of the
    steps the checkpoint covers; a torn last line (a kill mid-write) goes with them.
    """

    def __init__(self, path: Path, keep_steps_below: int) -> None:
        self.path = Path(path)
        if self.path.exists():
            keep_bytes = sum(size for record, size in _parse_metrics(self.path) if record["step"] < keep_steps_below)
            if keep_bytes != self.path.stat().st_size:
                os.truncate(self.path, keep_bytes)

    def append(self, record: dict) -> None:
        line = (json.dumps(record, sort_keys=True, allow_nan=True) + "\n").encode()
        with self.path.open("ab") as handle:
            handle.write(line)


def _parse_metrics(path: Path) -> list[tuple[dict, int]]:
    """Each whole record of metrics.jsonl with its size in bytes, in file order (records are in
    step order, so a prefix of the file is a prefix of the list). A torn last line (no newline,
    or not a record) is dropped with a warning; a bad line elsewhere is an error naming it."""
    return [(line.record, line.size) for line in read_jsonl(path, check=_check_step, torn_tail=True)]


def _check_step(record: dict) -> None:
    if not isinstance(record.get("step"), int):
        raise ValueError("not a metrics record (no integer step)")


def read_metrics(path: Path) -> list[dict]:
    """The records of metrics.jsonl; a torn last line is dropped with a warning."""
    return [record for record, _ in _parse_metrics(path)]


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
            now_ms = int(time.time() * 1000)  # the wall time of logging: MLflow's charts by time read it
            batch = [Metric(key.replace("@", "_at_"), value, now_ms, step) for key, value in finite.items()]
            self._client.log_batch(self.run_id, metrics=batch)

    @contextmanager
    def system_metrics(self, interval_s: float = 10.0):
        """MLflow's system metrics of this machine (`system/cpu_utilization_percentage`, memory,
        disk, network and, with pynvml, GPU) every `interval_s` seconds while the block runs, into
        this run; nothing when tracking is off. The sampling thread stops by itself when the run
        is no longer RUNNING, so the run is set RUNNING first (a job runs in it)."""
        if not self._client:
            yield
            return
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        self._client.update_run(self.run_id, status="RUNNING")
        monitor = SystemMetricsMonitor(self.run_id, sampling_interval=interval_s, resume_logging=True, tracking_uri=self.tracking_uri)
        monitor.start()
        try:
            yield
        finally:
            monitor.finish()

    def set_tag(self, key: str, value: str) -> None:
        if self._client:
            self._client.set_tag(self.run_id, key, value)

    def finish(self, status: str = "completed", reason: str = "") -> None:
        """End the run: FINISHED, tagged `klrl.status` (completed or diverged) and, when
        diverged, `klrl.diverged_reason` (a diverged cell is a result, not a failure); later
        jobs may still log into it."""
        if self._client:
            finish_run(self._client, self.run_id, status, reason)

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


def tracker_from_args(args: argparse.Namespace, cell_folder: Path | None = None) -> Tracker:
    """The tracker the tracking arguments name; tracking is off without any. With a cell's
    train folder, the run of its current attempt when the folder records one
    (klrl.training.attempt), else the runs file's."""
    if args.mlflow_runs:
        if not args.mlflow_key:
            raise ValueError("--mlflow-runs needs --mlflow-key (the cell id, or base/<model>)")
        tracker = Tracker.from_runs_file(args.mlflow_runs, args.mlflow_key)
        if cell_folder is not None and tracker.run_id:
            from klrl.training.attempt import recorded_run

            tracker.run_id = recorded_run(cell_folder, json.loads(Path(args.mlflow_runs).read_text())) or tracker.run_id
        return tracker
    return Tracker(args.mlflow_run_id)


def finish_run(client, run_id: str, status: str, reason: str = "") -> None:
    """A cell's run ended by its status.json's status: FINISHED with `klrl.status`, and the
    reason of a divergence as `klrl.diverged_reason`."""
    client.set_tag(run_id, "klrl.status", status)
    if reason:
        client.set_tag(run_id, "klrl.diverged_reason", reason)
    client.set_terminated(run_id, "FINISHED")


STATUSES = ("completed", "diverged")


def write_status(folder: Path, status: str, step: int, reason: str = "") -> None:
    """status.json, written to a temporary name, flushed and renamed: whole or absent."""
    record = {"status": status, "step": step, "reason": reason}
    write_atomic(Path(folder) / STATUS, json.dumps(record, indent=2) + "\n", durable=True)


def read_status(folder: Path) -> dict | None:
    """A finished cell's status (completed or diverged, with its final/ model), or None when the
    cell is not finished. A status.json that is empty, not JSON, of an unknown status or without
    final/ beside it does not count as finished: a warning names it."""
    path = Path(folder) / STATUS
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
        problem = "" if isinstance(record, dict) else "not a JSON object"
    except (ValueError, UnicodeDecodeError) as error:
        record, problem = None, f"not valid JSON ({error})"
    if not problem and (record.get("status") not in STATUSES or not isinstance(record.get("step"), int)):
        problem = f"status must be one of {', '.join(STATUSES)} with an integer step"
    if not problem and not (Path(folder) / FINAL / "config.json").is_file():
        problem = "final/ holds no model"
    if problem:
        warnings.warn(f"{path}: ignored, {problem}: the cell is not finished", stacklevel=2)
        return None
    return record
