"""The MLflow run a job logs into, and what names a run: its key tag, its tags, the code's commit.

`Tracker` is MLflow when a run id is given and a no-op otherwise; a job finds its run in the
grid's runs file (`klrl track-grid` writes it: `read_runs_file`), and a cell's jobs log into the
run of the cell's current attempt (klrl.tracking.attempt_runs), recorded in its train folder.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from klrl.grid.expansion import parse_cell_id
from klrl.tracking.credentials import use_credentials

KEY_TAG = "klrl.key"  # the tag naming a run's cell id, base/<model> or grid
BATCH = 1000  # the most metrics MLflow takes in one log_batch


def read_runs_file(path: Path) -> dict:
    """A grid's runs file: {tracking_uri (None: tracking off), experiment_id, runs: key → run id,
    credentials: the server's credentials file or None}; this process's MLflow clients then
    authenticate with those credentials (klrl.tracking.credentials.use_credentials)."""
    runs = json.loads(Path(path).read_text())
    use_credentials(runs.get("credentials"))
    return runs


def source_commit() -> str | None:
    """The git commit of the klrl code that runs (None outside a git checkout or without git)."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def run_tags(key: str) -> dict[str, str]:
    """Tags of a cell's run (from its id) or of a base model's run (`base/<model>`).

    >>> run_tags("base/tiny")
    {'model': 'tiny', 'kl': 'base'}
    """
    if key.startswith("base/"):
        return {"model": key.removeprefix("base/"), "kl": "base"}
    return {name: str(value) for name, value in parse_cell_id(key).items()}


class Tracker:
    """MLflow logging into an existing run (the workflow creates it), or nothing at all."""

    def __init__(self, run_id: str | None = None, tracking_uri: str | None = None) -> None:
        self.run_id = run_id
        self.tracking_uri = tracking_uri
        self._client = None
        self._held: set[tuple[str, int]] | None = None  # (metric, step) the run held before this job
        if run_id:
            from mlflow.tracking import MlflowClient

            self._client = MlflowClient(tracking_uri)

    @property
    def lost(self) -> bool:
        """Whether this tracker had a run and lost its server (`_send`)."""
        return self.run_id is not None and self._client is None

    @classmethod
    def from_runs_file(cls, path: Path, key: str) -> Tracker:
        """The run `key` (a cell id, or `base/<model>`) of a grid's runs file (`klrl track-grid`);
        a no-op tracker when the file says tracking is off."""
        runs = read_runs_file(path)
        if not runs["tracking_uri"]:
            return cls()
        if key not in runs["runs"]:
            raise ValueError(f"{path}: no MLflow run for {key!r}; re-run `klrl track-grid` (the grid changed?)")
        return cls(runs["runs"][key], runs["tracking_uri"])

    def _send(self, call, *args, **options) -> None:
        """A call of the MLflow client. When one fails past MLflow's own retries (the server is
        gone, or refuses the credentials), this job's tracking ends with one line on stderr and
        the job goes on: its files keep every metric, which `klrl track-reconcile` uploads later."""
        from mlflow.exceptions import MlflowException

        try:
            call(*args, **options)
        except (MlflowException, OSError) as error:
            reason = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
            print(
                f"MLflow at {self.tracking_uri} lost ({reason}): this job goes on untracked, its metrics in its"
                " files (`klrl track-reconcile` uploads them)",
                file=sys.stderr,
                flush=True,
            )
            self._client = None

    def log_params(self, params: dict) -> None:
        if self._client:
            from mlflow.entities import Param

            params = [Param(key, str(value)) for key, value in params.items()]
            self._send(self._client.log_batch, self.run_id, params=params)

    def log_metrics(self, metrics: dict, step: int) -> None:
        """The finite values at `step`, in one request; a metric the run already held at that step
        before this job began is left as it is, so each (metric, step) is in the run once. A job
        resumed from a checkpoint recomputes the steps its killed attempt may have logged after
        it; the resume is exact, so those rows hold the same values (their timings are the killed
        attempt's)."""
        self.log_history([(metrics, step)])

    def log_history(self, points: list[tuple[dict, int]]) -> None:
        """The metrics of each (metrics, step) that the run lacks, as `log_metrics` does, in
        requests of up to BATCH rows: a job's whole metrics.jsonl once its run missed some."""
        if self._client and self._held is None:
            self._send(self._hold_logged_points)
        if not self._client:
            return
        from mlflow.entities import Metric

        now_ms = int(time.time() * 1000)  # the wall time of logging: MLflow's charts by time read it
        batch = [
            Metric(key.replace("@", "_at_"), float(value), now_ms, step)
            for metrics, step in points
            for key, value in metrics.items()
            if isinstance(value, (int, float)) and math.isfinite(value)
        ]
        batch = [metric for metric in batch if (metric.key, metric.step) not in self._held]
        for start in range(0, len(batch), BATCH):
            if self._client:
                self._send(self._client.log_batch, self.run_id, metrics=batch[start : start + BATCH])

    def _hold_logged_points(self) -> None:
        self._held = self._logged_points()

    def _logged_points(self) -> set[tuple[str, int]]:
        """Each (metric, step) the run holds, MLflow's system metrics aside (one request for a
        run without metrics, one more a metric otherwise)."""
        keys = [key for key in self._client.get_run(self.run_id).data.metrics if not key.startswith("system/")]
        return {(key, point.step) for key in keys for point in self._client.get_metric_history(self.run_id, key)}

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
        monitor = SystemMetricsMonitor(
            self.run_id, sampling_interval=interval_s, resume_logging=True, tracking_uri=self.tracking_uri
        )
        monitor.start()
        try:
            yield
        finally:
            monitor.finish()

    def set_tag(self, key: str, value: str) -> None:
        if self._client:
            self._send(self._client.set_tag, self.run_id, key, value)

    def finish(self, status: str = "completed", reason: str = "") -> None:
        """End the run: FINISHED, tagged `klrl.status` (completed or diverged) and, when
        diverged, `klrl.diverged_reason` (a diverged cell is a result, not a failure); later
        jobs may still log into it."""
        if self._client:
            self._send(finish_run, self._client, self.run_id, status, reason)

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        """A file, or a folder and everything in it, under `artifact_path` in the run."""
        if self._client:
            if Path(path).is_dir():
                folder = f"{artifact_path}/{Path(path).name}" if artifact_path else Path(path).name
                self._send(self._client.log_artifacts, self.run_id, str(path), folder)
            else:
                self._send(self._client.log_artifact, self.run_id, str(path), artifact_path)


def finish_run(client, run_id: str, status: str, reason: str = "") -> None:
    """A cell's run ended by its status.json's status: FINISHED with `klrl.status`, and the
    reason of a divergence as `klrl.diverged_reason`."""
    client.set_tag(run_id, "klrl.status", status)
    if reason:
        client.set_tag(run_id, "klrl.diverged_reason", reason)
    client.set_terminated(run_id, "FINISHED")
