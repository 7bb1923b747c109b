"""The tracking server with passwords (klrl.tracking.server, klrl.tracking.mlflow_accounts), one
server for the module: its secrets owner-only; a second local user, without credentials or with
an MLflow account of their own, can neither read nor write the owner's runs (401/403) and
`psql` as the role is refused; the owner's credentials file opens everything; wrong credentials
stop a grid at load in one line; rotation gives each account a new password. PostgreSQL from
Debian (`make postgresql`); skipped without it, unless KLRL_REQUIRE_POSTGRES is set; the second
user's test needs root (CI runs as root)."""

import base64
import json
import os
import shutil
import stat
import subprocess
import tempfile
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from klrl.tracking.credentials import read_credentials, tracking_server_problem, write_credentials
from klrl.tracking.mlflow_accounts import ADMIN_FILE, JOBS_FILE, rotate_passwords
from klrl.tracking.server import client_environment, postgres_bin, tracking_server
from tracking.test_server import needs_postgres


@pytest.fixture(scope="module")
def server():
    """The authenticated server (2 workers) under /tmp, which PostgreSQL's user (as root) reaches."""
    folder = Path(tempfile.mkdtemp(prefix="klrl-auth-"))
    folder.chmod(0o755)
    try:
        with tracking_server(folder / "state", workers=2) as address:
            yield address, folder / "state"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _rest(address: str, method: str, endpoint: str, body: dict | None, who: tuple[str, str] | None) -> int:
    """The HTTP status of one call of MLflow's REST API as `who` (username, password) or nobody."""
    headers = {"Content-Type": "application/json"}
    if who:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(who).encode()).decode()
    data = json.dumps(body).encode() if method == "POST" else None
    query = "" if method == "POST" else "?" + "&".join(f"{key}={value}" for key, value in (body or {}).items())
    request = urllib.request.Request(f"{address}/api/2.0/{endpoint}{query}", data, headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def _owners_run(address: str, state: Path) -> tuple[str, str]:
    """An experiment and a run the jobs' user made, with a metric: (experiment id, run id)."""
    from mlflow.tracking import MlflowClient

    previous = {key: os.environ.get(key) for key in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")}
    os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"] = read_credentials(state / JOBS_FILE)
    try:
        client = MlflowClient(address)
        experiment = client.create_experiment(f"owner-{uuid.uuid4().hex[:8]}")
        run = client.create_run(experiment).info.run_id
        client.log_metric(run, "loss", 1.0, step=0)
    finally:
        for key, value in previous.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)
    return experiment, run


def _calls(experiment: str, run: str) -> dict[str, tuple]:
    """Reading and writing the owner's runs through the REST API."""
    return {
        "get run": ("GET", "mlflow/runs/get", {"run_id": run}),
        "search runs": ("POST", "mlflow/runs/search", {"experiment_ids": [experiment]}),
        "metric history": ("GET", "mlflow/metrics/get-history", {"run_id": run, "metric_key": "loss"}),
        "log metric": ("POST", "mlflow/runs/log-metric", {"run_id": run, "key": "x", "value": 1, "timestamp": 0}),
        "delete run": ("POST", "mlflow/runs/delete", {"run_id": run}),
    }


def _postgres_port(state: Path) -> str:
    return (state / "postgres" / "postmaster.pid").read_text().splitlines()[3].strip()


@pytest.mark.slow
@needs_postgres
def test_the_servers_secrets_are_owner_only_and_not_mlflows_default(server):
    address, state = server
    for name in (ADMIN_FILE, JOBS_FILE, "postgres.pgpass", "flask-secret", "auth.db"):
        assert stat.S_IMODE((state / name).stat().st_mode) == 0o600, name
    admin = read_credentials(state / ADMIN_FILE)
    assert len(admin[1]) == 32 and admin[1] != read_credentials(state / JOBS_FILE)[1]
    assert admin[1] not in (state / "auth.ini").read_text()
    for guess in ("password", "password1234", ""):  # MLflow's documented examples
        assert _rest(address, "GET", "mlflow/users/get", {"username": admin[0]}, (admin[0], guess)) == 401
    assert _rest(address, "GET", "mlflow/users/get", {"username": admin[0]}, admin) == 200


@pytest.mark.slow
@needs_postgres
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("useradd"), reason="creating a second local user needs root")
def test_a_second_local_user_can_neither_read_nor_write_the_owners_runs_nor_open_the_database(server):
    address, state = server
    experiment, run = _owners_run(address, state)
    admin, guest = read_credentials(state / ADMIN_FILE), ("guest", "guest-" + uuid.uuid4().hex)
    assert _rest(address, "POST", "mlflow/users/create", {"username": guest[0], "password": guest[1]}, admin) == 200
    other = f"klrl-other-{uuid.uuid4().hex[:6]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", other], check=True)
    try:

        def as_other(*command: str) -> subprocess.CompletedProcess:
            return subprocess.run(["runuser", "-u", other, "--", *command], capture_output=True, text=True, cwd="/")

        for name, (method, endpoint, body) in _calls(experiment, run).items():
            url = f"{address}/api/2.0/{endpoint}"
            curl = ["curl", "-s", "-w", "\\n%{http_code}", "-X", method, "-H", "Content-Type: application/json"]
            if method == "POST":
                curl += ["-d", json.dumps(body)]
            else:
                url += "?" + "&".join(f"{key}={value}" for key, value in body.items())
            assert as_other(*curl, url).stdout.splitlines()[-1] == "401", name  # no credentials
            answer, code = as_other(*curl, "-u", ":".join(guest), url).stdout.rsplit("\n", 1)  # their own account
            if name == "search runs":  # a search answers with what the user may read: nothing
                assert (code, json.loads(answer)) == ("200", {}), name
            else:
                assert code == "403", name
        for name in (JOBS_FILE, ADMIN_FILE, "postgres.pgpass", "auth.db"):
            assert as_other("cat", str(state / name)).returncode != 0, name
        psql = [str(postgres_bin() / "psql"), "-w", "-h", "127.0.0.1", "-p", _postgres_port(state), "-U", "klrl"]
        refused = as_other(*psql, "-d", "mlflow", "-c", "SELECT count(*) FROM runs")
        assert refused.returncode != 0 and "no password supplied" in refused.stderr, refused.stderr
        socket = as_other(*psql[:3], str(state / "postgres"), *psql[5:], "-d", "mlflow", "-c", "SELECT 1")
        assert socket.returncode != 0, socket.stdout  # the socket's folder is closed to others
    finally:
        subprocess.run(["userdel", other], check=True)
    jobs = read_credentials(state / JOBS_FILE)  # the owner's credentials: everything works
    for name, (method, endpoint, body) in _calls(experiment, run).items():
        assert _rest(address, method, endpoint, body, jobs) == 200, name
    owner = subprocess.run(
        [*psql, "-d", "mlflow", "-tAc", f"SELECT count(*) FROM runs WHERE run_uuid = '{run}'"],
        capture_output=True,
        text=True,
        env=os.environ | client_environment(state),
    )
    assert owner.stdout.strip() == "1", owner.stderr


@pytest.mark.slow
@needs_postgres
def test_wrong_or_missing_credentials_stop_a_grid_at_load_in_one_line(server, tmp_path):
    address, state = server
    write_credentials(tmp_path / "wrong.credentials", "klrl-jobs", "not-the-password")
    config = {"tracking": {"uri": address, "credentials": str(tmp_path / "wrong.credentials")}}
    assert tracking_server_problem(config) == (
        f"tracking server {address}: refused the credentials of {tmp_path / 'wrong.credentials'} (HTTP 401);"
        " set tracking.credentials or KLRL_TRACKING_CREDENTIALS"
    )
    assert tracking_server_problem({"tracking": {"uri": address}}) == (
        f"tracking server {address}: requires credentials (HTTP 401); set tracking.credentials or KLRL_TRACKING_CREDENTIALS"
    )
    assert tracking_server_problem({"tracking": {"uri": address, "credentials": str(state / JOBS_FILE)}}) == ""
    assert tracking_server_problem({"tracking": {"uri": address, "enabled": False}}) == ""


def test_a_server_without_authentication_serves_loopback_only(tmp_path):
    with pytest.raises(
        ValueError, match=r"^--host node1: a server reachable from other machines requires authentication$"
    ):
        with tracking_server(tmp_path / "state", host="node1", auth=False):
            pass
    assert not (tmp_path / "state").exists()  # refused before anything was made


@pytest.mark.slow
@needs_postgres
def test_rotation_gives_each_account_a_new_password_in_its_owner_only_file(server):
    """Last in the module: the server's passwords change."""
    address, state = server
    old = {name: read_credentials(state / name) for name in (JOBS_FILE, ADMIN_FILE)}
    rotate_passwords(state, address)
    for name, (username, password) in old.items():
        new = read_credentials(state / name)
        assert new[0] == username and new[1] != password and len(new[1]) == 32
        assert stat.S_IMODE((state / name).stat().st_mode) == 0o600
        assert _rest(address, "GET", "mlflow/users/get", {"username": username}, new) == 200
    assert not list(state.glob("*.new"))
