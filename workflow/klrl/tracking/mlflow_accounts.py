"""The accounts of the tracking server's MLflow authentication (MLflow's basic-auth app): an
administrator and the user a grid's jobs log as, each with a generated password in a
credentials file under STATE (klrl.tracking.credentials), and their rotation.

MLflow's auth app reads STATE/auth.ini (no secret in it: its user database STATE/auth.db, no
permission for users on what they did not create, the administrator's name, its cache of
verified passwords); the administrator's
password reaches it in MLFLOW_AUTH_ADMIN_PASSWORD, read on its first start only, and the secret
key of its forms' CSRF tokens in MLFLOW_FLASK_SERVER_SECRET_KEY (one for every worker). Once the
server answers, the jobs' user is created (as the administrator) when it does not exist yet.
"""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.request
from pathlib import Path

from klrl.tracking.credentials import generate_password, read_credentials, read_secret, write_credentials, write_secret

ADMIN, JOBS = "klrl-admin", "klrl-jobs"
ADMIN_FILE, JOBS_FILE = "admin.credentials", "jobs.credentials"
FLASK_SECRET = "flask-secret"
AUTH_CONFIG, AUTH_DATABASE = "auth.ini", "auth.db"
# Each worker keeps a password it verified for this long instead of hashing it again (PBKDF2) at
# every request, which cost a job's requests about a second each on a loaded machine; a password
# changed through another worker is still accepted that long there.
AUTH_CACHE_S = 60


def _ensure_credentials(path: Path, username: str) -> bool:
    """A credentials file for `username` with a new password unless one exists; whether it is new."""
    if path.exists():
        return False
    write_credentials(path, username, generate_password())
    return True


def auth_environment(state: Path) -> dict[str, str]:
    """The variables `mlflow server --app-name basic-auth` needs, its files written the first
    time (the administrator's credentials, the CSRF key, auth.ini)."""
    state = Path(state)
    _ensure_credentials(state / ADMIN_FILE, ADMIN)
    if not (state / FLASK_SECRET).exists():
        write_secret(state / FLASK_SECRET, generate_password())
    if not (state / AUTH_DATABASE).exists():
        write_secret(state / AUTH_DATABASE, "")  # SQLite keeps the mode of the file it opens: 0600
    (state / AUTH_CONFIG).unlink(missing_ok=True)
    write_secret(
        state / AUTH_CONFIG,
        "[mlflow]\n"
        "default_permission = NO_PERMISSIONS\n"
        f"database_uri = sqlite:///{state / AUTH_DATABASE}\n"
        f"admin_username = {ADMIN}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
        f"auth_cache_ttl_seconds = {AUTH_CACHE_S}\n",
    )
    return {
        "MLFLOW_AUTH_CONFIG_PATH": str(state / AUTH_CONFIG),
        "MLFLOW_AUTH_ADMIN_USERNAME": ADMIN,
        "MLFLOW_AUTH_ADMIN_PASSWORD": read_credentials(state / ADMIN_FILE)[1],
        "MLFLOW_FLASK_SERVER_SECRET_KEY": read_secret(state / FLASK_SECRET),
    }


def _call(address: str, credentials: tuple[str, str], method: str, path: str, body: dict | None = None) -> dict:
    token = base64.b64encode(":".join(credentials).encode()).decode()
    request = urllib.request.Request(
        f"{address}/api/2.0/mlflow/users/{path}",
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"},
        method=method,
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read() or b"{}")


def _user_exists(address: str, admin: tuple[str, str], username: str) -> bool:
    try:
        _call(address, admin, "GET", f"get?username={username}")
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return False
        raise
    return True


def ensure_jobs_user(state: Path, address: str) -> Path:
    """The jobs' user on the server at `address`, created with the password of its credentials
    file (written first, the first time); returns that file."""
    path = Path(state) / JOBS_FILE
    _ensure_credentials(path, JOBS)
    admin = read_credentials(Path(state) / ADMIN_FILE)
    username, password = read_credentials(path)
    if not _user_exists(address, admin, username):
        _call(address, admin, "POST", "create", {"username": username, "password": password})
    return path


def rotate_passwords(state: Path, address: str) -> None:
    """New passwords for the jobs' user and the administrator, set on the server, then written
    over their credentials files (jobs first: the administrator's old password sets both)."""
    admin = read_credentials(Path(state) / ADMIN_FILE)
    for name in (JOBS_FILE, ADMIN_FILE):
        path = Path(state) / name
        username, current = read_credentials(path)
        password = generate_password()
        change = {"username": username, "password": password}
        if username == admin[0]:  # MLflow asks a user changing their own password for the current one
            change["current_password"] = current
        _call(address, admin, "PATCH", "update-password", change)
        fresh = path.with_name(path.name + ".new")
        fresh.unlink(missing_ok=True)
        write_credentials(fresh, username, password)
        os.replace(fresh, path)
