"""`klrl track-reconcile`: no MLflow run stays RUNNING after its job has ended.

A job killed (kill -9, out of memory, a lost node) cannot end its run, so the workflow calls
this verb when it starts and when it ends (the Snakefile's onstart, onsuccess and onerror
handlers: no job of the workflow runs then). Every RUNNING run of the grid's experiment is
ended by what its files say:
- a cell's current attempt (the run recorded in its train folder, klrl.tracking.attempt_runs):
  first the rows of its metrics.jsonl that the run lacks are uploaded (a job that lost its server
  went on untracked, klrl.tracking.runs.Tracker; the run stays RUNNING while the upload fails), then
  FINISHED when status.json says completed, FINISHED tagged `klrl.status=diverged` and
  `klrl.diverged_reason` when diverged, KILLED (`klrl.status=killed`) when there is no status,
  SCHEDULED when its job never started (no config.yaml; runs of a store made before
  `klrl track-grid` created them SCHEDULED); a cell whose train.lock a live process may hold
  (klrl.core.folder_lock) is left as it is;
- a cell's run that is not its current attempt's (a new attempt was created but not recorded):
  KILLED, `klrl.status=abandoned`;
- a base model's run: FINISHED when its evaluation logged its scores, else SCHEDULED (to be
  evaluated by the next invocation);
- the grid's parent run: FINISHED (the invocation is over).
Idempotent and cheap (one search); with tracking off it does nothing.
"""

from __future__ import annotations

from pathlib import Path

from klrl.core.folder_lock import lock_is_held
from klrl.core.paths import CONFIG, METRICS, TRAIN_LOCK, Layout
from klrl.tracking.attempt_runs import recorded_run
from klrl.tracking.runs import KEY_TAG, Tracker, finish_run, read_runs_file
from klrl.training.record import read_metrics, read_status


def _end(client, run_id: str, status: str, label: str) -> str:
    client.set_tag(run_id, "klrl.status", label)
    client.set_terminated(run_id, status)
    return label


def _reconcile_cell(client, run, folder: Path, current: str, uri: str) -> str | None:
    if lock_is_held(folder / TRAIN_LOCK):
        return None
    if run.info.run_id != current:
        return _end(client, run.info.run_id, "KILLED", "abandoned")
    if (folder / METRICS).exists():  # what a job that lost its server could not log
        tracker = Tracker(run.info.run_id, uri)
        tracker.log_history([(record, record["step"]) for record in read_metrics(folder / METRICS)])
        if tracker.lost:
            return None  # still RUNNING: the next reconcile uploads the rest
    status = read_status(folder)
    if status is None and not (folder / CONFIG).exists():  # its job never started
        return _end(client, run.info.run_id, "SCHEDULED", "scheduled")
    if status is None:
        return _end(client, run.info.run_id, "KILLED", "killed")
    finish_run(client, run.info.run_id, status["status"], status.get("reason", ""))
    return status["status"]


def reconcile(runs_file: Path, root: Path) -> dict[str, str]:
    """End the experiment's RUNNING runs whose jobs are over; returns run key → what it became."""
    runs = read_runs_file(runs_file)
    if not runs["tracking_uri"]:
        return {}
    from mlflow.tracking import MlflowClient

    client = MlflowClient(runs["tracking_uri"])
    running, token = [], None
    while True:
        page = client.search_runs(
            [runs["experiment_id"]], "attributes.status = 'RUNNING'", max_results=1000, page_token=token
        )
        running += list(page)
        token = page.token
        if not token:
            break
    ended = {}
    for run in running:
        key = run.data.tags.get(KEY_TAG)
        if key is None:
            continue
        if key == "grid":
            outcome = _end(client, run.info.run_id, "FINISHED", "completed")
        elif key.startswith("base/"):
            scored = any(name.startswith("final_eval/") for name in run.data.metrics)
            outcome = _end(
                client, run.info.run_id, "FINISHED" if scored else "SCHEDULED", "completed" if scored else "scheduled"
            )
        else:
            folder = Layout(Path(root)).train(key)
            current = recorded_run(folder, runs) or runs["runs"].get(key)
            outcome = _reconcile_cell(client, run, folder, current, runs["tracking_uri"])
        if outcome:
            ended[f"{key} ({run.info.run_id})"] = outcome
    return ended
