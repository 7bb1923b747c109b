"""Where a cell's numbers go: `metrics.jsonl` (the record), MLflow (a mirror), status.json.

`MetricsLog` appends one JSON line per step and, on resume, drops the lines of steps the
checkpoint does not cover, so a resumed history equals an uninterrupted one. `Tracker` is
MLflow when a run id is given and a no-op otherwise.
"""

from __future__ import annotations

import json
import math
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

    def __init__(self, run_id: str | None = None) -> None:
        self.run_id = run_id
        self._client = None
        if run_id:
            from mlflow.tracking import MlflowClient

            self._client = MlflowClient()

    def log_params(self, params: dict) -> None:
        if self._client:
            for key, value in params.items():
                self._client.log_param(self.run_id, key, value)

    def log_metrics(self, metrics: dict, step: int) -> None:
        if self._client:
            from mlflow.entities import Metric

            finite = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and math.isfinite(v)}
            batch = [Metric(key.replace("@", "_at_"), value, 0, step) for key, value in finite.items()]
            self._client.log_batch(self.run_id, metrics=batch)

    def log_artifact(self, path: Path) -> None:
        if self._client:
            self._client.log_artifact(self.run_id, str(path))


def write_status(folder: Path, status: str, step: int, reason: str = "") -> None:
    record = {"status": status, "step": step, "reason": reason}
    (Path(folder) / "status.json").write_text(json.dumps(record, indent=2) + "\n")
