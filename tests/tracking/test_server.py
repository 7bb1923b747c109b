"""The tracking server on PostgreSQL (`klrl tracking-server`, what `make tracking-server` runs),
started and stopped here as a person would: 32 concurrent writer processes logging through the
jobs' Tracker lose and duplicate nothing, and writers keep every row across a restart of the
server. Only 127.0.0.1. PostgreSQL comes from Debian (`make postgresql`, which `make test`
runs); without it these tests are skipped, unless KLRL_REQUIRE_POSTGRES is set."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from mlflow.exceptions import MlflowException

from klrl.tracking.runs import Tracker
from klrl.tracking.mlflow_process import free_port


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
    """`python -m klrl tracking-server` in a session of its own, once its server answers."""
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
    for _ in range(240):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return server
        except OSError:
            if server.poll() is not None:
                raise RuntimeError(
                    f"klrl tracking-server exited with {server.returncode}: {server.stdout.read()[-3000:]}"
                )
            time.sleep(0.5)
    server.send_signal(signal.SIGINT)
    raise RuntimeError("klrl tracking-server did not answer within 120 s")


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


def _load(address: str, report: Path, writers: int, seconds: float) -> subprocess.Popen:
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
    """32 writer processes for 8 s, every row and file read back once; then 8 writers for 20 s
    while the server (MLflow and PostgreSQL) is stopped and started again on the same port: their
    requests are retried by MLflow's client (its own backoff) and nothing is lost or doubled."""
    port = free_port()
    server = _start(state, port)
    try:
        loaded = _load(f"http://127.0.0.1:{port}", tmp_path / "load.json", 32, 8)
        assert loaded.wait(timeout=300) == 0, loaded.stdout.read()[-3000:]
        _assert_every_row_once(json.loads((tmp_path / "load.json").read_text()), 32)

        restarted = _load(f"http://127.0.0.1:{port}", tmp_path / "restart.json", 8, 20)
        time.sleep(8)  # the writers are logging
        assert restarted.poll() is None
        _stop(server, state)
        server = _start(state, port)
        assert restarted.wait(timeout=400) == 0, restarted.stdout.read()[-3000:]
        _assert_every_row_once(json.loads((tmp_path / "restart.json").read_text()), 8)
    finally:
        _stop(server, state)


def test_a_job_whose_server_is_gone_fails_loudly(monkeypatch):
    """Past MLflow's retries (here none) a logging call raises: the job fails, nothing is dropped silently."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    tracker = Tracker("0" * 32, f"http://127.0.0.1:{free_port()}")
    with pytest.raises(MlflowException, match="Max retries exceeded|Connection refused"):
        tracker.log_metrics({"loss": 1.0}, step=0)
