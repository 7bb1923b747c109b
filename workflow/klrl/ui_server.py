"""An MLflow tracking server over a store, on a free port of 127.0.0.1 (or the one given), for as
long as a `with` block lasts: the UI's screenshots for the README (klrl.ui_screenshots), the
PostgreSQL-backed tracking server (klrl.tracking.server) and the tests that read a run's store
through the REST API and the UI; and `klrl ui` (`make ui`), which serves a config's store for a
person and prints the address of its experiment's runs table (MLflow 3 opens on a GenAI overview
otherwise, whatever the experiment's kind tag says)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


DEFAULT_STORE = "sqlite:///results/mlflow.db"  # the config schema's default tracking.uri


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
):
    """`mlflow server` over `store_uri` on `host`:`port` (a free port by default), its address
    yielded once it answers /health; stopped with its whole process group, checked to leave
    nothing behind. `env`: variables added to the server's environment."""
    port = port or free_port()
    command = [str(Path(sys.executable).parent / "mlflow"), "server", "--host", host, "--port", str(port), *options]
    command += ["--backend-store-uri", store_uri]
    server = subprocess.Popen(
        command,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    address = f"http://{host}:{port}"
    try:
        for _ in range(180):
            try:
                with urllib.request.urlopen(f"{address}/health", timeout=2):
                    break
            except OSError:
                if server.poll() is not None:
                    raise RuntimeError(f"mlflow server exited with code {server.returncode}")
                time.sleep(1)
        else:
            raise RuntimeError("mlflow server did not answer /health within 180 s")
        yield address
    finally:
        stop_group(server)


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


def runs_table(address: str, store_uri: str, experiment: str) -> str:
    """The UI address of the runs table of a config's `experiment` (klrl-<experiment>) in the store."""
    from mlflow.tracking import MlflowClient

    from klrl.tracking.grid import mlflow_experiment_name

    name = mlflow_experiment_name(experiment)
    found = MlflowClient(store_uri).get_experiment_by_name(name)
    if found is None:
        raise ValueError(f"{store_uri}: no experiment {name!r} yet (run the grid first: make run)")
    return f"{address}/#/experiments/{found.experiment_id}/runs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", type=Path, default=Path("config/config.yaml"), help="the workflow config whose runs to show"
    )
    parser.add_argument("--port", type=int, default=5000)


def run(args: argparse.Namespace) -> None:
    from klrl.files import read_yaml

    config = read_yaml(args.config)
    tracking = config.get("tracking") or {}
    if not tracking.get("enabled", True):
        raise ValueError(f"{args.config}: tracking is off (tracking.enabled: false), there is nothing to show")
    store = os.environ.get("MLFLOW_TRACKING_URI") or tracking.get("uri", DEFAULT_STORE)
    if store.startswith(("http://", "https://")):  # a tracking server serves its own UI
        print(f"MLflow UI: {runs_table(store.rstrip('/'), store, config['experiment'])}", flush=True)
        return
    if store.startswith("sqlite:///") and not Path(store.removeprefix("sqlite:///")).exists():
        raise ValueError(f"{store}: no store yet (run the grid first: make run)")
    url = runs_table(f"http://127.0.0.1:{args.port}", store, config["experiment"])
    stop_on_signals()
    with mlflow_server(store, Path.cwd(), port=args.port):
        print(f"MLflow UI: {url} (the runs of {config['experiment']}; Ctrl-C stops it)", flush=True)
        signal.pause()
