"""The MLflow run of each attempt of a cell (klrl.training.attempt says what an attempt is), and
the tracker a job's tracking arguments name (`tracker_from_args`).

The run of the attempt is recorded in the cell's train folder as `mlflow_run.json` (run id,
attempt id, store and experiment). The first attempt takes the cell's run of the runs file
(`klrl track-grid`); a later one gets a new run under the grid's parent run, with the cell's
tags, and the run it replaces is ended KILLED, tagged `klrl.status=superseded` and
`klrl.superseded_by=<new run id>`, and renamed `<cell> (attempt n, superseded)`. A re-run of the
same attempt continues its run (set RUNNING again). The evaluate job logs into the recorded run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from klrl.core.files import write_atomic
from klrl.core.paths import RUN_RECORD
from klrl.tracking.credentials import credentials_path, use_credentials
from klrl.tracking.runs import KEY_TAG, Tracker, read_runs_file, run_tags, source_commit
from klrl.training.attempt import SUPERSEDED, attempt_id
from klrl.training.config import TrainConfig


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
    slots = sorted(
        (path for path in (folder / SUPERSEDED).glob("*") if path.name.isdigit()), key=lambda path: int(path.name)
    )
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

    runs = read_runs_file(runs_file)
    client, attempt = MlflowClient(runs["tracking_uri"]), attempt_id(config)
    record = _read_record(folder / RUN_RECORD, runs)
    earlier = _superseded_runs(folder, runs)
    if record and record.get("attempt") == attempt:
        run_id = record["run_id"]
    elif base.run_id not in earlier:
        run_id = base.run_id
    else:
        old = client.get_run(earlier[-1])
        tags = {
            name: value
            for name, value in old.data.tags.items()
            if name in (KEY_TAG, "mlflow.parentRunId", "group", *run_tags(key))
        }
        run_id = client.create_run(runs["experiment_id"], run_name=key, tags=tags).info.run_id
    folder.mkdir(parents=True, exist_ok=True)
    record = {
        "run_id": run_id,
        "attempt": attempt,
        "tracking_uri": runs["tracking_uri"],
        "experiment_id": runs["experiment_id"],
    }
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


def add_tracking_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mlflow-run-id",
        help="log into this MLflow run (MLFLOW_TRACKING_URI names the store, KLRL_TRACKING_CREDENTIALS its credentials)",
    )
    parser.add_argument("--mlflow-runs", type=Path, help="a grid's runs file (klrl track-grid); with --mlflow-key")
    parser.add_argument("--mlflow-key", help="this job's run in --mlflow-runs: a cell id or base/<model>")


def tracker_from_args(args: argparse.Namespace, cell_folder: Path | None = None) -> Tracker:
    """The tracker the tracking arguments name; tracking is off without any. With a cell's
    train folder, the run of its current attempt when the folder records one, else the runs
    file's."""
    if args.mlflow_runs:
        if not args.mlflow_key:
            raise ValueError("--mlflow-runs needs --mlflow-key (the cell id, or base/<model>)")
        tracker = Tracker.from_runs_file(args.mlflow_runs, args.mlflow_key)
        if cell_folder is not None and tracker.run_id:
            tracker.run_id = recorded_run(cell_folder, read_runs_file(args.mlflow_runs)) or tracker.run_id
        return tracker
    if args.mlflow_run_id:
        use_credentials(credentials_path(None))  # KLRL_TRACKING_CREDENTIALS, when set
    return Tracker(args.mlflow_run_id)
