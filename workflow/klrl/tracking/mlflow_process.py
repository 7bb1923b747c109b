"""An MLflow tracking server over a store, on a free port of 127.0.0.1 (or the one given), for as
long as a `with` block lasts, and the stopping of a server's whole process group: the PostgreSQL
tracking server (klrl.tracking.server), `klrl ui`, the UI screenshots of docs/results.md and the tests that
read a run's store through the REST API and the UI."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


# How long a server may take to answer /health. With authentication it imports MLflow in each
# worker and creates its tables in two databases, about 40 s of CPU: on 2 cores shared with a test
# suite's other processes that has taken over 180 s. A server that exits is reported at once.
STARTUP_S = 600


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def mlflow_server(
    store_uri: str,
    cwd: Path,
    *options: str,
    host: str = "127.0.0.1",
    port: int | None = None,
    env: dict[str, str] | None = None,
    log: Path | None = None,
):
    """`mlflow server` over `store_uri` on `host`:`port` (a free port by default), its address
    yielded once it answers /health; stopped with its whole process group, checked to leave
    nothing behind. `env`: variables added to the server's environment; `log`: the file its
    output is appended to (owner-only; by default it is dropped)."""
    port = port or free_port()
    command = [str(Path(sys.executable).parent / "mlflow"), "server", "--host", host, "--port", str(port), *options]
    command += ["--backend-store-uri", store_uri]
    output = private_log(log) if log else subprocess.DEVNULL
    try:
        server = subprocess.Popen(
            command,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdout=output,
            stderr=output,
            start_new_session=True,
        )
    finally:
        if log:
            os.close(output)
    shown = f" (log: {log})" if log else ""
    address = f"http://{host}:{port}"
    deadline = time.monotonic() + STARTUP_S
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{address}/health", timeout=2):
                    break
            except OSError:
                if server.poll() is not None:
                    raise RuntimeError(f"mlflow server exited with code {server.returncode}{shown}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"mlflow server did not answer /health within {STARTUP_S} s{shown}")
                time.sleep(1)
        yield address
    finally:
        stop_group(server)


def private_log(path: Path) -> int:
    """A descriptor appending to the log file `path`, which only its owner reads (0600, made so
    where it was wider): a server's log may quote a request or a connection string."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.fchmod(descriptor, 0o600)
    return descriptor


def _group_alive(leader: int) -> bool:
    """Whether any process of the group still runs (zombies, already dead, do not count)."""
    listing = subprocess.run(["ps", "-e", "-o", "pgid=,stat="], capture_output=True, text=True, check=True)
    return any(
        pgid == str(leader) and not stat.startswith("Z") for pgid, stat in map(str.split, listing.stdout.splitlines())
    )


def stop_group(process: subprocess.Popen, first: signal.Signals = signal.SIGTERM) -> None:
    """Signal the process group (a server and its workers) with `first`, SIGKILL what outlives
    20 s, then check that nothing of the group is left."""
    os.killpg(process.pid, first)
    deadline = time.monotonic() + 20
    while _group_alive(process.pid) and time.monotonic() < deadline:
        process.poll()
        time.sleep(0.5)
    if _group_alive(process.pid):
        os.killpg(process.pid, signal.SIGKILL)
        time.sleep(1)
    process.wait(timeout=30)
    if _group_alive(process.pid):
        raise RuntimeError(f"the process group {process.pid} outlived SIGKILL")


def stop_on_signals() -> None:
    """From now on Ctrl-C or `kill` (SIGINT or SIGTERM, even in a background job, where the
    shell ignores SIGINT) ends this process through SystemExit, so that the servers of the
    `with` blocks it is in stop first."""
    stop = lambda *_: sys.exit(0)  # noqa: E731
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
