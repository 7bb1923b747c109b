"""A cell's record in its train folder: `metrics.jsonl` (one line per step) and `status.json`.

`MetricsLog` appends one JSON line per step and, on resume, cuts off the lines of steps the
checkpoint does not cover (and a torn last line), so a resumed history equals an uninterrupted
one. status.json is written atomically, last, and read back validated (`read_status`). These
files are the record every later step reads (evaluation, aggregation, track-reconcile); MLflow
only mirrors them, through the `RunTracker` the trainer is handed (klrl.tracking.runs.Tracker;
`NoTracking` when nothing is tracked).
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Protocol

from klrl.core.files import read_jsonl, write_atomic
from klrl.core.paths import FINAL, STATUS
from klrl.core.provenance import source_commit, utc_now


class RunTracker(Protocol):
    """What the trainer logs a run's record to besides its files (klrl.tracking.runs.Tracker)."""

    def log_params(self, params: dict) -> None: ...
    def log_metrics(self, metrics: dict, step: int) -> None: ...
    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None: ...
    def set_tag(self, key: str, value: str) -> None: ...
    def finish(self, status: str = "completed", reason: str = "") -> None: ...


class NoTracking:
    """A `RunTracker` that logs nowhere: a run nothing tracks, and every process but rank 0."""

    def log_params(self, params: dict) -> None:
        pass

    def log_metrics(self, metrics: dict, step: int) -> None:
        pass

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        pass

    def set_tag(self, key: str, value: str) -> None:
        pass

    def finish(self, status: str = "completed", reason: str = "") -> None:
        pass


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


STATUSES = ("completed", "diverged")


def write_status(folder: Path, status: str, step: int, reason: str = "") -> None:
    """status.json, written to a temporary name, flushed and renamed: whole or absent. It names
    the commit the trainer ran from and when it finished (klrl.core.provenance)."""
    record = {"status": status, "step": step, "reason": reason, "commit": source_commit(), "finished": utc_now()}
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
