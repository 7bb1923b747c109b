"""The tracking server on PostgreSQL (`klrl tracking-server`, what `make tracking-server` runs),
started and stopped here as a person would: 32 concurrent writer processes logging through the
jobs' Tracker lose and duplicate nothing, and writers keep every row across a restart of the
server; a job that loses its server trains on and the reconcile verb uploads what its run missed.
Only 127.0.0.1. PostgreSQL comes from Debian (`make postgresql`, which `make test`
runs); without it these tests are skipped, unless KLRL_REQUIRE_POSTGRES is set."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from klrl.tracking.credentials import server_problem
from klrl.tracking.experiment import track_grid
from klrl.tracking.mlflow_accounts import JOBS_FILE
from klrl.tracking.mlflow_process import free_port, mlflow_server
from klrl.tracking.reconcile import reconcile
from klrl.tracking.runs import Tracker
from klrl.training.record import write_status


def _postgres_installed() -> bool:
    try:
        from klrl.tracking.server import postgres_bin

        return postgres_bin().is_dir()
    except OSError:
        return False


needs_postgres = pytest.mark.skipif(
    not _postgres_installed() and not os.environ.get("KLRL_REQUIRE_POSTGRES"),
    reason="PostgreSQL is not installed (`make postgresql` installs Debian's, as root)",
)


def _start(state: Path, port: int) -> subprocess.Popen:
    """`python -m klrl tracking-server` in a process group of its own, once its server accepts the jobs'
    credentials (their file and user are made after the server first answers)."""
    command = [
        sys.executable,
        "-m",
        "klrl",
        "tracking-server",
        "--state",
        str(state),
        "--port",
        str(port),
        "--workers",
        "2",
    ]
    server = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    for _ in range(480):
        if not server_problem(f"http://127.0.0.1:{port}", state / JOBS_FILE, timeout=30):
            return server
        if server.poll() is not None:
            raise RuntimeError(f"klrl tracking-server exited with {server.returncode}: {server.stdout.read()[-3000:]}")
        time.sleep(0.5)
    server.send_signal(signal.SIGINT)
    raise RuntimeError("klrl tracking-server did not accept its jobs' credentials within 240 s")


def _stop(server: subprocess.Popen, state: Path) -> None:
    """Ctrl-C, as a person stops it: the command ends and so does PostgreSQL (its pid file gone)."""
    server.send_signal(signal.SIGINT)
    assert server.wait(timeout=60) == 0, server.stdout.read()[-3000:]
    assert not (state / "postgres" / "postmaster.pid").exists()


@pytest.fixture(scope="module")
def state():
    """The server's folder, under /tmp: as root PostgreSQL runs as `postgres`, which must reach it."""
    folder = Path(tempfile.mkdtemp(prefix="klrl-tracking-"))
    folder.chmod(0o755)
    yield folder / "state"
    shutil.rmtree(folder, ignore_errors=True)


def _load(address: str, credentials: Path, report: Path, writers: int, seconds: float) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "klrl",
        "tracking-load",
        "--uri",
        address,
        "--writers",
        str(writers),
        "--seconds",
        str(seconds),
        "--artifact-every",
        "5",
        "--report",
        str(report),
        "--credentials",
        str(credentials),
    ]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _assert_every_row_once(figures: dict, writers: int) -> None:
    assert figures["writers"] == writers and figures["writers_failed"] == 0, figures["first_error"]
    assert figures["rows_logged"] >= 2 * writers and figures["files_logged"] >= 1
    assert (figures["rows_lost"], figures["rows_duplicated"], figures["params_lost"]) == (0, 0, 0)
    assert figures["rows_arrived"] == figures["rows_logged"]
    assert (figures["files_lost"], figures["files_arrived"]) == (0, figures["files_logged"])


@pytest.mark.slow
@needs_postgres
def test_32_writer_processes_lose_nothing_and_survive_a_restart_of_the_server(state, tmp_path):
    """32 writer processes for 8 s, logged in as the jobs' user, every row and file read back once;
    then 8 writers for 20 s while the server (MLflow and PostgreSQL) is stopped and started again
    on the same port: their requests are retried by MLflow's client (its own backoff) and nothing
    is lost or doubled."""
    port = free_port()
    server = _start(state, port)
    try:
        loaded = _load(f"http://127.0.0.1:{port}", state / JOBS_FILE, tmp_path / "load.json", 32, 8)
        assert loaded.wait(timeout=600) == 0, loaded.stdout.read()[-3000:]
        _assert_every_row_once(json.loads((tmp_path / "load.json").read_text()), 32)

        restarted = _load(f"http://127.0.0.1:{port}", state / JOBS_FILE, tmp_path / "restart.json", 8, 20)
        time.sleep(8)  # the writers are logging
        assert restarted.poll() is None
        _stop(server, state)
        server = _start(state, port)
        assert restarted.wait(timeout=600) == 0, restarted.stdout.read()[-3000:]
        _assert_every_row_once(json.loads((tmp_path / "restart.json").read_text()), 8)
    finally:
        _stop(server, state)


@pytest.mark.slow
def test_a_job_that_loses_its_server_trains_on_and_reconcile_uploads_what_its_run_missed(tmp_path, monkeypatch, capfd):
    """Past MLflow's retries (here none) the job's tracker says so in one line and stops logging,
    without raising; its metrics.jsonl holds every step, and once the server is back the reconcile
    verb uploads the rows the run lacks, each (metric, step) once, then ends the run."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    port, cell = free_port(), "tiny__k3-loss__b0.1__on__s0"
    folder = tmp_path / "cells" / cell / "train"
    folder.mkdir(parents=True)
    records = [{"step": step, "loss": 1 / (step + 1), "kl/k3@2": step / 10} for step in range(6)]
    store = f"sqlite:///{tmp_path}/mlflow.db"
    with mlflow_server(store, tmp_path, "--workers", "1", port=port) as address:
        track_grid("lost", address, [cell], tmp_path / "runs.json", {cell: "on-policy"})
        tracker = Tracker.from_runs_file(tmp_path / "runs.json", cell)
        tracker._client.update_run(tracker.run_id, status="RUNNING")  # its job started
        for record in records[:2]:
            tracker.log_metrics(record, record["step"])
    for record in records[2:]:  # the server is gone: the job goes on
        tracker.log_metrics(record, record["step"])
    tracker.finish()
    lost = [line for line in capfd.readouterr().err.splitlines() if line.startswith("MLflow at")]
    assert len(lost) == 1 and lost[0].startswith(f"MLflow at {address} lost (")
    assert lost[0].endswith(
        "this job goes on untracked, its metrics in its files (`klrl track-reconcile` uploads them)"
    )
    (folder / "config.yaml").write_text("steps: 5\n")
    (folder / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    (folder / "final").mkdir()
    (folder / "final" / "config.json").write_text("{}")  # a finished cell's model
    write_status(folder, "completed", 5)
    with mlflow_server(store, tmp_path, "--workers", "1", port=port):
        assert reconcile(tmp_path / "runs.json", tmp_path)[f"{cell} ({tracker.run_id})"] == "completed"
        client = MlflowClient(address)
        assert client.get_run(tracker.run_id).info.status == "FINISHED"
        for key, metric in (("loss", "loss"), ("kl/k3@2", "kl/k3_at_2"), ("step", "step")):
            history = sorted((point.step, point.value) for point in client.get_metric_history(tracker.run_id, metric))
            assert history == [(record["step"], pytest.approx(record[key])) for record in records], metric
