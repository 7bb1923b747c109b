"""`klrl tracking-server`: an MLflow tracking server backed by PostgreSQL, for grids whose jobs
write at once from many processes or nodes (SQLite's file locking is the weak point there).

    python -m klrl tracking-server --state results/tracking-server --port 5001   (make tracking-server)

starts Debian's PostgreSQL (`make postgresql` installs it) on a data folder under STATE (created
on first use, kept across restarts), creates its database `mlflow`, then `mlflow server` over it
with its artifacts under STATE/artifacts, served through the server (clients upload over HTTP,
so jobs on other nodes need no shared folder). It prints the `tracking.uri` to put in a config
and runs until Ctrl-C, which stops both. As root, PostgreSQL runs as the `postgres` user (it
refuses root), so STATE must be a folder that user can reach. The tests start the same pair
with `tracking_server` and stop it by process group.

PostgreSQL admits the role `klrl` with its password only (scram-sha-256, on 127.0.0.1 and its
socket in its data folder), the password generated at the first start into STATE/postgres.pgpass
(mode 0600, libpq's password file, handed to the server's clients in PGPASSFILE). `mlflow server`
runs MLflow's basic-auth app with an administrator and a user for the grid's jobs
(klrl.tracking.mlflow_accounts), their passwords in STATE/admin.credentials and
STATE/jobs.credentials (0600): the file a grid names in `tracking.credentials`. Without
authentication (`auth=False`, the unauthenticated side of a load comparison) it serves 127.0.0.1
only. docs/cluster.md: the server on a login node for compute nodes.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from klrl.tracking.credentials import generate_password, write_secret
from klrl.tracking.mlflow_accounts import auth_environment, ensure_jobs_user, rotate_passwords
from klrl.tracking.mlflow_process import free_port, mlflow_server, private_log, stop_group
from klrl.tracking.server_host import allowed_hosts, clear_http_problem, loopback

DATABASE = "mlflow"
ROLE = "klrl"
# Each worker of `mlflow server` (uvicorn) runs up to 40 requests at once, in anyio's default
# thread pool; with SQLAlchemy's default pool (5 + 10 overflow) every request past the 15th
# waited for a connection, and under load timed out after 30 s (BAD_REQUEST "QueuePool limit").
# So each worker's pool holds a connection for every request thread, plus a margin, and
# PostgreSQL admits every worker's whole pool and a few connections of its own tools.
REQUEST_THREADS = 40
POOL_OVERFLOW = 10
SPARE_CONNECTIONS = 10


def postgres_bin() -> Path:
    """The folder of PostgreSQL's server programs: Debian's newest /usr/lib/postgresql/<v>/bin,
    else where `postgres` is on PATH."""
    folders = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda path: int(Path(path).parts[-3]))
    found = folders[-1] if folders else shutil.which("postgres")
    if not found:
        raise OSError("PostgreSQL is not installed: `make postgresql` (apt-get install postgresql) as root")
    return Path(found).parent


def _server_user() -> str | None:
    """The user PostgreSQL runs as: `postgres` when this is root, else this user (None)."""
    return "postgres" if os.geteuid() == 0 else None


def _run_as(user: str | None, command: list[str], **options) -> subprocess.CompletedProcess:
    done = subprocess.run(command, user=user, capture_output=True, text=True, **options)
    if done.returncode:
        raise RuntimeError(f"{Path(command[0]).name} failed: {(done.stderr or done.stdout).strip()[-2000:]}")
    return done


def _password_file(state: Path) -> Path:
    """STATE/postgres.pgpass: the role's password for libpq (created with the cluster)."""
    return state / "postgres.pgpass"


def _init_cluster(state: Path, data: Path, user: str | None) -> None:
    """A database cluster in `data` the first time: the role's password generated into its
    libpq password file (0600) and handed to initdb on its standard input; every connection
    authenticated by it (scram-sha-256)."""
    if (data / "PG_VERSION").exists():
        if not _password_file(state).exists():
            raise OSError(
                f"{data}: a database made without a password (or {_password_file(state)} was removed);"
                " move STATE aside to start a new one"
            )
        return
    data.mkdir(parents=True, exist_ok=True)
    if user:
        shutil.chown(data, user, user)
        probe = subprocess.run(["test", "-w", str(data)], user=user)
        if probe.returncode:
            raise OSError(f"{data}: the postgres user cannot write there (a parent folder closed to others?)")
    password = generate_password()
    scratch = Path(tempfile.mkdtemp(dir=state))  # 0700: initdb reads the password from a file of its user's
    try:
        write_secret(scratch / "password", password + "\n")
        if user:
            for path in (scratch, scratch / "password"):
                shutil.chown(path, user, user)
        initdb = [str(postgres_bin() / "initdb"), "-D", str(data), "-U", ROLE, f"--pwfile={scratch / 'password'}"]
        _run_as(user, initdb + ["--auth-host=scram-sha-256", "--auth-local=scram-sha-256", "-E", "UTF8"])
    finally:
        shutil.rmtree(scratch)
    write_secret(_password_file(state), f"127.0.0.1:*:*:{ROLE}:{password}\n")


@contextlib.contextmanager
def postgres(state: Path, port: int | None = None, connections: int = 100):
    """PostgreSQL on 127.0.0.1:`port` (a free one by default) over STATE/postgres, admitting
    `connections` at once, its database `mlflow` created; yields its SQLAlchemy URI (no
    password: clients read it from PGPASSFILE, `client_environment`), stopped (fast shutdown)
    when the block ends."""
    state, user = Path(state).resolve(), _server_user()
    data, port = state / "postgres", port or free_port()
    _init_cluster(state, data, user)
    command = [
        str(postgres_bin() / "postgres"),
        "-D",
        str(data),
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
        "-k",
        str(data),
        "-N",
        str(connections),
    ]
    log = private_log(state / "postgres.log")
    server = subprocess.Popen(command, user=user, stdout=log, stderr=log, start_new_session=True)
    os.close(log)
    client = {**os.environ, **client_environment(state)}
    try:
        ready = [str(postgres_bin() / "pg_isready"), "-h", "127.0.0.1", "-p", str(port), "-U", ROLE, "-d", "postgres"]
        for _ in range(120):
            if subprocess.run(ready, capture_output=True).returncode == 0:
                break
            if server.poll() is not None:
                raise RuntimeError(f"postgres exited with code {server.returncode} (log: {state / 'postgres.log'})")
            time.sleep(0.5)
        else:
            raise RuntimeError("postgres did not accept connections within 60 s")
        psql = [str(postgres_bin() / "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", ROLE, "-d", "postgres", "-tAc"]
        if not _run_as(
            None, psql + [f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'"], env=client
        ).stdout.strip():
            _run_as(None, psql + [f"CREATE DATABASE {DATABASE}"], env=client)
        yield f"postgresql://{ROLE}@127.0.0.1:{port}/{DATABASE}"
    finally:
        stop_group(server, signal.SIGINT)  # SIGINT: PostgreSQL's fast shutdown


def client_environment(state: Path) -> dict[str, str]:
    """What a client of the database (psql, `mlflow server`) needs to authenticate: libpq's password file."""
    return {"PGPASSFILE": str(_password_file(Path(state).resolve()))}


@contextlib.contextmanager
def tracking_server(
    state: Path,
    host: str = "127.0.0.1",
    port: int | None = None,
    workers: int = 4,
    auth: bool = True,
    rotate: bool = False,
    plain_http: bool = False,
):
    """PostgreSQL and `mlflow server` over it (artifacts under STATE/artifacts, served over HTTP),
    with MLflow's authentication (`auth`; required off loopback) and, with `rotate`, new
    passwords for its accounts; yields the server's address. Off loopback it admits the host's
    names (klrl.tracking.server_host) and starts only with `plain_http` (clear HTTP allowed)."""
    problem = clear_http_problem(host, auth, plain_http)
    if problem:
        raise ValueError(problem)
    port = port or free_port()
    state = Path(state).resolve()
    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o711 if _server_user() else 0o700)  # PostgreSQL's user, as root, must reach STATE/postgres
    (state / "artifacts").mkdir(exist_ok=True)
    (state / "artifacts").chmod(0o700)
    environment = {
        "MLFLOW_SQLALCHEMYSTORE_POOL_SIZE": str(REQUEST_THREADS),
        "MLFLOW_SQLALCHEMYSTORE_MAX_OVERFLOW": str(POOL_OVERFLOW),
        **client_environment(state),
    }
    options = ["--workers", str(workers), "--artifacts-destination", str(state / "artifacts")]
    if not loopback(host):
        options += ["--allowed-hosts", ",".join(allowed_hosts(host, port))]
    if auth:
        environment |= auth_environment(state)
        options += ["--app-name", "basic-auth"]
    with postgres(state, connections=workers * (REQUEST_THREADS + POOL_OVERFLOW) + SPARE_CONNECTIONS) as database:
        served = mlflow_server(
            database, state, *options, host=host, port=port, env=environment, log=state / "mlflow.log"
        )
        with served as address:
            if auth:
                ensure_jobs_user(state, address)
                if rotate:
                    rotate_passwords(state, address)
            yield address
