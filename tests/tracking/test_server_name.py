"""The tracking server under a node's name, as docs/cluster.md starts it (`klrl tracking-server
--host <name>`, what `make tracking-server TRACKING_HOST=<name>` runs): the test gives this
machine a name that is not loopback (an address of 198.18.0.0/15, which MLflow's default allowed
hosts do not cover, on the loopback device, and a line of /etc/hosts, both removed after), and
writers log through the server by that name; without --plain-http the server refuses the name
in one line. Needs root (CI runs as root) and PostgreSQL (`make postgresql`)."""

import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from klrl.tracking.credentials import server_problem
from klrl.tracking.mlflow_accounts import AUTH_CONFIG, JOBS_FILE
from klrl.tracking.mlflow_process import free_port
from klrl.tracking.server_host import allowed_hosts, jobs_uri, loopback
from tracking.test_server import _assert_every_row_once, _load, needs_postgres

HOSTS = Path("/etc/hosts")


@pytest.fixture
def node_name():
    """A name of this machine that is not loopback: its address added to `lo`, its line to /etc/hosts."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("giving this machine a name and an address needs root and iproute2")
    name, address = f"klrl-node-{uuid.uuid4().hex[:6]}", f"198.18.{random.randint(1, 254)}.{random.randint(1, 254)}"
    added = subprocess.run(["ip", "address", "add", f"{address}/32", "dev", "lo"], capture_output=True, text=True)
    if added.returncode:
        pytest.skip(f"cannot add an address to lo: {added.stderr.strip()}")
    line = f"{address} {name}\n"
    try:
        with HOSTS.open("a") as hosts:
            hosts.write(line)
        yield name
    finally:
        HOSTS.write_text("".join(kept for kept in HOSTS.read_text().splitlines(True) if kept != line))
        subprocess.run(["ip", "address", "del", f"{address}/32", "dev", "lo"], check=False)


def _server(state: Path, host: str, port: int, *options: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "klrl", "tracking-server", "--state", str(state), "--host", host]
    command += ["--port", str(port), "--workers", "2", *options]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


@pytest.mark.slow
@needs_postgres
def test_jobs_log_through_the_server_by_the_nodes_name(node_name, tmp_path):
    folder = Path(tempfile.mkdtemp(prefix="klrl-named-"))  # as root PostgreSQL's user must reach it
    folder.chmod(0o755)
    state, port = folder / "state", free_port()
    uri = f"http://{node_name}:{port}"

    refused = _server(state, node_name, port)
    assert refused.wait(timeout=120) == 2
    assert refused.stderr.read().strip().splitlines() == [
        f"klrl tracking-server: error: --host {node_name}: the jobs' passwords would cross the network in clear"
        " HTTP; on a network you trust pass --plain-http (make tracking-server TRACKING_PLAIN_HTTP=1), else keep"
        " 127.0.0.1 and reach it through an SSH tunnel (--debug for the traceback)"
    ]
    assert not state.exists()

    server = _server(state, node_name, port, "--plain-http")
    try:
        deadline = time.monotonic() + 480
        while server_problem(uri, state / JOBS_FILE, timeout=30):
            assert server.poll() is None, server.stderr.read()[-3000:]
            assert time.monotonic() < deadline, server_problem(uri, state / JOBS_FILE)
            time.sleep(0.5)
        loaded = _load(uri, state / JOBS_FILE, tmp_path / "load.json", 2, 3)
        assert loaded.wait(timeout=600) == 0, loaded.stdout.read()[-3000:]
        _assert_every_row_once(json.loads((tmp_path / "load.json").read_text()), 2)
        for name in ("postgres.log", "mlflow.log", AUTH_CONFIG):  # STATE's files are closed to others
            assert stat.S_IMODE((state / name).stat().st_mode) == 0o600, name
        assert (state / "mlflow.log").stat().st_size > 0  # the server's own output, kept
    finally:
        server.send_signal(signal.SIGINT)
        out, err = server.communicate(timeout=120)
        shutil.rmtree(folder, ignore_errors=True)
    assert f"tracking.uri: {uri}, tracking.credentials: {state / JOBS_FILE}" in out
    assert (
        f"warning: {node_name} is reachable from other machines over clear HTTP: the MLflow passwords of every"
        " request can be read on the network's path"
    ) in err.splitlines()


def test_a_host_is_admitted_under_its_names_and_addresses_with_the_port_and_loopback_is_an_address():
    assert {"localhost:5001", "localhost", "127.0.0.1:5001", "127.0.0.1"} <= set(allowed_hosts("localhost", 5001))
    assert jobs_uri("login01", 5001) == "http://login01:5001"
    assert [loopback(host) for host in ("127.0.0.2", "::1", "localhost")] == [True, True, True]
    assert [loopback(host) for host in ("127.evil.example", "login01", "10.0.0.1")] == [False, False, False]
