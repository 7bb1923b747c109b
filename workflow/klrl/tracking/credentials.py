"""Credentials of an authenticated tracking server: generated secrets kept in files only their
owner reads, the credentials file a grid's jobs authenticate from, and the check at a grid's
load that its server answers and accepts them (`tracking_server_problem`).

A credentials file is MLflow's own format (~/.mlflow/credentials):

    [mlflow]
    mlflow_tracking_username = klrl-jobs
    mlflow_tracking_password = ...

`klrl tracking-server` writes one per account under its STATE (klrl.tracking.server). A grid
names the jobs' file in KLRL_TRACKING_CREDENTIALS or its config's `tracking.credentials`; a
process that uses it puts the two values in MLflow's client variables (MLFLOW_TRACKING_USERNAME
and MLFLOW_TRACKING_PASSWORD) of its own environment, so that no password is ever on a command
line, in a config, a log or a runs file: those hold the file's path alone. A file that a group
or other users may read is refused.
"""

from __future__ import annotations

import base64
import configparser
import json
import os
import secrets
import stat
import urllib.error
import urllib.request
from pathlib import Path

ENVIRONMENT = "KLRL_TRACKING_CREDENTIALS"
SECTION = "mlflow"
USERNAME, PASSWORD = "mlflow_tracking_username", "mlflow_tracking_password"


def generate_password() -> str:
    """A new random password (192 bits, URL-safe characters)."""
    return secrets.token_urlsafe(24)


def write_secret(path: Path, text: str) -> None:
    """`text` into a new file `path` that only its owner reads and writes (mode 0600 from its
    creation, never wider); an existing file is left as it is (FileExistsError)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)


def write_credentials(path: Path, username: str, password: str) -> None:
    """A credentials file (0600) for `username`."""
    write_secret(path, f"[{SECTION}]\n{USERNAME} = {username}\n{PASSWORD} = {password}\n")


def read_secret(path: Path) -> str:
    """A secret file's text, refused (one line) when a group or other users may read or write it."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except OSError as error:
        raise ValueError(f"{path}: cannot read the credentials ({error.strerror})") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ValueError(f"{path}: readable by others (mode {stat.S_IMODE(mode):04o}); `chmod 600 {path}` first")
    return path.read_text()


def read_credentials(path: Path) -> tuple[str, str]:
    """The (username, password) of a credentials file; a missing, open or malformed file is one line."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(read_secret(path))
        username, password = parser[SECTION][USERNAME], parser[SECTION][PASSWORD]
    except (configparser.Error, KeyError):
        raise ValueError(f"{path}: not a credentials file ([{SECTION}] with {USERNAME} and {PASSWORD})") from None
    if not username or not password:
        raise ValueError(f"{path}: empty {USERNAME if not username else PASSWORD}")
    return username, password


def credentials_path(configured: str | None) -> Path | None:
    """The jobs' credentials file: KLRL_TRACKING_CREDENTIALS when set, else the config's
    `tracking.credentials` (None: the server takes no credentials), made absolute."""
    named = os.environ.get(ENVIRONMENT) or configured
    return Path(named).expanduser().resolve() if named else None


def use_credentials(path: Path | None) -> None:
    """Authenticate this process's MLflow clients with the credentials file `path` (nothing for None)."""
    if path is not None:
        username, password = read_credentials(Path(path))
        os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"] = username, password


def server_problem(uri: str, credentials: Path | None, timeout: float = 60.0) -> str:
    """Why a grid's jobs could not log to the tracking server `uri` with `credentials` ('' when
    they can, and for a store that is not a server): one line naming the URI and the reason. One
    request, the search of one experiment, which needs the credentials when the server checks them."""
    if not uri.startswith(("http://", "https://")):
        return ""
    try:
        headers = {"Content-Type": "application/json"}
        if credentials is not None:
            token = base64.b64encode(":".join(read_credentials(credentials)).encode()).decode()
            headers["Authorization"] = f"Basic {token}"
    except ValueError as error:
        return f"tracking server {uri}: {error}"
    request = urllib.request.Request(
        f"{uri.rstrip('/')}/api/2.0/mlflow/experiments/search",
        data=json.dumps({"max_results": 1}).encode(),
        headers=headers,
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return ""
    except urllib.error.HTTPError as error:
        if error.code == 401:
            reason = "refused the credentials of " + str(credentials) if credentials else "requires credentials"
            return f"tracking server {uri}: {reason} (HTTP 401); set tracking.credentials or {ENVIRONMENT}"
        return f"tracking server {uri}: answered HTTP {error.code} {error.reason}"
    except (urllib.error.URLError, OSError) as error:
        return f"tracking server {uri}: unreachable ({getattr(error, 'reason', error)})"


def tracking_server_problem(config: dict) -> str:
    """Why a workflow config's jobs could not log to its tracking server (unreachable, or refusing
    its credentials), in one line naming the URI ('' when they can, tracking is off or the store
    is not a server): the Snakefile's check at load, before any job."""
    tracking = config.get("tracking") or {}
    if not tracking.get("enabled", True):
        return ""
    uri = os.environ.get("MLFLOW_TRACKING_URI") or tracking.get("uri", "")
    return server_problem(uri, credentials_path(tracking.get("credentials")))
