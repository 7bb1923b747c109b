"""A cell's attempts: one per resolved configuration, each with its own files and MLflow run.

An attempt is identified by `attempt_id`: a hash of the cell's resolved TrainConfig without
the fields that change how it is computed but not what (`HOW_FIELDS`: threads, device,
activation checkpointing, reference offload). At the start of `klrl train` the config.yaml in
the cell's train folder names the attempt whose files are there; when it differs from the new
one (a setting changed), that attempt's files (`ATTEMPT_FILES`: metrics, checkpoints,
status.json, final/, its run record and config.yaml, moved last) are moved to
`superseded/<n>/` and the new attempt starts from step 0: nothing computed is lost, and no
checkpoint of one configuration is resumed under another. A folder whose config.yaml is torn
or of an older code's keys counts as another attempt; files without a config.yaml (it is
written before any other) are taken as this attempt's, as before attempts existed. Re-running
the same configuration (after a kill) keeps the files and resumes.

The MLflow run of the attempt is recorded in the folder as `mlflow_run.json` (run id, attempt id,
store and experiment). The first attempt takes the cell's run of the runs file (`klrl
track-grid`); a later one gets a new run under the grid's parent run, with the cell's tags, and
the run it replaces is ended KILLED, tagged `klrl.status=superseded` and
`klrl.superseded_by=<new run id>`, and renamed `<cell> (attempt n, superseded)`. A re-run of the
same attempt continues its run (set RUNNING again). The evaluate job logs into the recorded run.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import yaml

from klrl.files import write_atomic
from klrl.paths import CONFIG, FINAL, METRICS, RUN_RECORD, STATUS
from klrl.tracking.grid import KEY_TAG, run_tags, source_commit
from klrl.training.checkpoint import NAME, PREVIOUS
from klrl.training.config import TrainConfig, load_config
from klrl.tracking.runs import Tracker

HOW_FIELDS = ("threads", "device", "activation_checkpointing", "reference_offload")
SUPERSEDED = "superseded"
# config.yaml last: a move killed half-way leaves it, so the next start finishes the move
ATTEMPT_FILES = (METRICS, NAME, PREVIOUS, NAME + ".tmp", STATUS, FINAL, RUN_RECORD, CONFIG)


def attempt_id(config: TrainConfig) -> str:
    """16 hex digits naming what the cell computes (not how: `HOW_FIELDS` are left out)."""
    values = {key: value for key, value in config.to_dict().items() if key not in HOW_FIELDS}
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]


def _saved_attempt(folder: Path) -> str | None:
    """The attempt of the files in `folder` by its config.yaml; '' when it is unreadable or
    not a config of this code (another attempt), None when there is none."""
    path = folder / CONFIG
    if not path.exists():
        return None
    try:
        return attempt_id(load_config(path))
    except (ValueError, TypeError, OSError):
        return ""


def _next_slot(folder: Path) -> Path:
    """superseded/<n>/ for the files being moved: the newest one again when a move into it
    was cut short (it lacks config.yaml), else a new one."""
    root = folder / SUPERSEDED
    numbers = sorted(int(path.name) for path in root.glob("*") if path.name.isdigit()) if root.is_dir() else []
    if numbers and not (root / str(numbers[-1]) / CONFIG).exists():
        return root / str(numbers[-1])
    return root / str((numbers[-1] if numbers else 0) + 1)


def begin_attempt(folder: Path, config: TrainConfig) -> Path | None:
    """Make `folder` hold `config`'s attempt: the files of another attempt are moved to
    superseded/<n>/ (returned; None when nothing was moved), then config.yaml is written."""
    folder = Path(folder)
    saved = _saved_attempt(folder)
    present = [name for name in ATTEMPT_FILES if (folder / name).exists()]
    slot = None
    if saved is not None and saved != attempt_id(config) and present:  # files without a config.yaml: this attempt's
        slot = _next_slot(folder)
        slot.mkdir(parents=True, exist_ok=True)
        for name in present:
            os.replace(folder / name, slot / name)
    write_config(folder, config)
    return slot


def write_config(folder: Path, config: TrainConfig) -> None:
    """The resolved config.yaml, whole or absent."""
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / CONFIG, yaml.safe_dump(config.to_dict(), sort_keys=True))


def _read_record(path: Path, runs: dict) -> dict | None:
    """A run record of the same store and experiment as the runs file, else None."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    same_store = isinstance(record, dict) and (record.get("tracking_uri"), record.get("experiment_id")) == (
        runs["tracking_uri"],
        runs["experiment_id"],
    )
    return record if same_store and isinstance(record.get("run_id"), str) else None


def recorded_run(folder: Path, runs: dict) -> str | None:
    """The run id of the attempt whose files are in the cell's train folder, if recorded for
    this store."""
    record = _read_record(Path(folder) / RUN_RECORD, runs)
    return record["run_id"] if record else None


def _superseded_runs(folder: Path, runs: dict) -> list[str]:
    """The runs of the superseded attempts, oldest first."""
    slots = sorted((path for path in (folder / SUPERSEDED).glob("*") if path.name.isdigit()), key=lambda path: int(path.name))
    records = (_read_record(slot / RUN_RECORD, runs) for slot in slots)
    return [record["run_id"] for record in records if record]


def attempt_tracker(folder: Path, config: TrainConfig, runs_file: Path, key: str) -> Tracker:
    """The tracker of the cell's current attempt (call after `begin_attempt`, holding the
    cell's lock): its recorded run, else the runs file's run when no earlier attempt used it,
    else a new run; the run is recorded, set RUNNING and tagged with the attempt and the commit."""
    folder, base = Path(folder), Tracker.from_runs_file(runs_file, key)
    if not base.run_id:
        return base
    from mlflow.tracking import MlflowClient

    runs = json.loads(Path(runs_file).read_text())
    client, attempt = MlflowClient(runs["tracking_uri"]), attempt_id(config)
    record = _read_record(folder / RUN_RECORD, runs)
    earlier = _superseded_runs(folder, runs)
    if record and record.get("attempt") == attempt:
        run_id = record["run_id"]
    elif base.run_id not in earlier:
        run_id = base.run_id
    else:
        old = client.get_run(earlier[-1])
        tags = {name: value for name, value in old.data.tags.items() if name in (KEY_TAG, "mlflow.parentRunId", "group", *run_tags(key))}
        run_id = client.create_run(runs["experiment_id"], run_name=key, tags=tags).info.run_id
    folder.mkdir(parents=True, exist_ok=True)
    record = {"run_id": run_id, "attempt": attempt, "tracking_uri": runs["tracking_uri"], "experiment_id": runs["experiment_id"]}
    write_atomic(folder / RUN_RECORD, json.dumps(record, indent=2) + "\n")
    for number, old_id in enumerate(earlier, 1):
        _mark_superseded(client, old_id, run_id, key, number)
    tags = {"klrl.attempt": attempt, "klrl.attempt_number": str(len(earlier) + 1), "klrl.status": "running"}
    if commit := source_commit():
        tags["mlflow.source.git.commit"] = commit
    for name, value in tags.items():
        client.set_tag(run_id, name, value)
    client.update_run(run_id, status="RUNNING")
    return Tracker(run_id, runs["tracking_uri"])


def _mark_superseded(client, old_id: str, new_id: str, key: str, number: int) -> None:
    """End a superseded attempt's run KILLED, tagged with its successor (once)."""
    if old_id == new_id or client.get_run(old_id).data.tags.get("klrl.superseded_by"):
        return
    client.set_tag(old_id, "klrl.status", "superseded")
    client.set_tag(old_id, "klrl.superseded_by", new_id)
    client.set_terminated(old_id, "KILLED")
    client.update_run(old_id, name=f"{key} (attempt {number}, superseded)")
