"""`klrl tracking-load`: a tracking store under many concurrent writers, every row checked.

    python -m klrl tracking-load --uri http://127.0.0.1:5001 --writers 32 --seconds 10
    python -m klrl tracking-load --uri sqlite:///results/load.db --writers 32 --seconds 10

WRITERS processes (forked from one that has imported MLflow and opened nothing, so each is a
process of its own, as a train job is, without paying MLflow's import) log for SECONDS through
the jobs' own `Tracker` into a run each: their params once, a batch of two metrics per step and
a file every ARTIFACT_EVERY steps. Then every run is read back: each metric row and each file
must be there exactly once. Prints the figures (rows logged, arrived, lost, duplicated; files;
writers that failed and their first error) and, with --report, writes them as JSON; exits 1
when anything was lost, duplicated or failed. Tracking servers and SQLite stores only; the
traffic goes where --uri says, so point it at a store of your own.
"""

from __future__ import annotations

import multiprocessing
import tempfile
import time
import uuid
from pathlib import Path

METRICS = ("loss", "reward")
ARTIFACTS = "checkpoints"


def _setup(uri: str, writers: int, artifacts: Path, answer) -> None:
    """The experiment and one run per writer (a process of its own: the parent opens nothing)."""
    from mlflow.tracking import MlflowClient

    if uri.startswith("sqlite:///"):
        Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    client = MlflowClient(uri)
    location = None if uri.startswith("http") else artifacts.resolve().as_uri()
    experiment = client.create_experiment(f"klrl-load-{uuid.uuid4().hex[:8]}", artifact_location=location)
    answer.put([client.create_run(experiment, run_name=f"writer-{index}").info.run_id for index in range(writers)])


def _write(uri: str, run_id: str, index: int, seconds: float, artifact_every: int, folder: Path, answer) -> None:
    """One writer: the steps and files it logged (a call that raised is not counted; one the
    Tracker could not deliver is, and the writer counts as failed)."""
    from klrl.tracking.runs import Tracker

    steps, files, error = 0, [], None
    try:
        tracker = Tracker(run_id, uri)
        tracker.log_params({"writer": index, "lr": 0.01, "kl": "k3-loss"})
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            tracker.log_metrics({"loss": 1 / (steps + 1), "reward": index + steps / 1000}, steps)
            steps += 1
            if steps % artifact_every == 0:
                path = folder / f"step{steps:05d}.txt"
                path.write_text(f"writer {index} step {steps}\n")
                tracker.log_artifact(path, ARTIFACTS)
                files.append(path.name)
        if tracker.lost:  # the Tracker stopped logging, with one line on stderr
            error = "the Tracker lost the server"
    except Exception as failure:  # reported, counted as a failed writer
        error = f"{type(failure).__name__}: {str(failure).strip().splitlines()[0] if str(failure).strip() else ''}"[
            :300
        ]
    answer.put({"run_id": run_id, "steps": steps, "files": files, "error": error})


def _read_back(uri: str, logged: list[dict]) -> dict:
    """Every writer's rows and files as the store has them, against what it logged."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    figures = {
        "rows_logged": 0,
        "rows_arrived": 0,
        "rows_lost": 0,
        "rows_duplicated": 0,
        "files_logged": 0,
        "files_arrived": 0,
        "files_lost": 0,
        "params_lost": 0,
    }
    for writer in logged:
        if len(client.get_run(writer["run_id"]).data.params) != 3 and writer["steps"]:
            figures["params_lost"] += 1
        for key in METRICS:
            steps = [metric.step for metric in client.get_metric_history(writer["run_id"], key)]
            figures["rows_logged"] += writer["steps"]
            figures["rows_arrived"] += len(steps)
            figures["rows_lost"] += len(set(range(writer["steps"])) - set(steps))
            figures["rows_duplicated"] += len(steps) - len(set(steps))
        stored = {Path(item.path).name for item in client.list_artifacts(writer["run_id"], ARTIFACTS)}
        figures["files_logged"] += len(writer["files"])
        figures["files_arrived"] += len(stored)
        figures["files_lost"] += len(set(writer["files"]) - stored)
    return figures


def load(uri: str, writers: int = 32, seconds: float = 10.0, artifact_every: int = 10) -> dict:
    """Run the load against `uri` and check it; returns the figures (see the module's doc)."""
    import mlflow.tracking  # noqa: F401  imported once, before the forks

    import klrl.tracking.runs  # noqa: F401

    processes = multiprocessing.get_context("fork")
    answer = processes.Queue()
    with tempfile.TemporaryDirectory(prefix="klrl-load-") as scratch:
        setup = processes.Process(target=_setup, args=(uri, writers, Path(scratch) / "artifacts", answer))
        setup.start()
        run_ids = answer.get(timeout=300)
        setup.join()
        folders = [Path(scratch) / f"writer-{index}" for index in range(writers)]
        jobs = []
        started = time.monotonic()
        for index, (run_id, folder) in enumerate(zip(run_ids, folders)):
            folder.mkdir()
            jobs.append(
                processes.Process(target=_write, args=(uri, run_id, index, seconds, artifact_every, folder, answer))
            )
            jobs[-1].start()
        logged = [answer.get(timeout=seconds + 600) for _ in jobs]
        for job in jobs:
            job.join()
        wall = time.monotonic() - started
        figures = {"store": uri.split(":", 1)[0], "writers": writers, "seconds": seconds} | _read_back(uri, logged)
    errors = [writer["error"] for writer in logged if writer["error"]]
    figures |= {
        "writers_failed": len(errors),
        "first_error": errors[0] if errors else None,
        "wall_s": round(wall, 1),
        "rows_per_s": round(figures["rows_arrived"] / wall, 1),
    }
    return figures
