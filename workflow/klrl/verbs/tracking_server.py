"""`klrl tracking-server` (`make tracking-server`): an MLflow tracking server on PostgreSQL for
many concurrent jobs (klrl.tracking.server), until Ctrl-C or kill."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

HELP = "an MLflow tracking server on PostgreSQL, for many concurrent jobs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state",
        type=Path,
        default=Path("results/tracking-server"),
        help="database and artifacts (kept across restarts)",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on; a node's name for jobs on other nodes"
    )
    parser.add_argument("--port", type=int, default=5001)
    parser.add_argument("--workers", type=int, default=4, help="the server's worker processes")
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help="MLflow without authentication (127.0.0.1 only): anyone who reaches the port reads and writes every run",
    )
    parser.add_argument(
        "--plain-http",
        action="store_true",
        help="serve a --host other than loopback over clear HTTP, where the passwords cross the network readable",
    )
    parser.add_argument(
        "--rotate-credentials",
        action="store_true",
        help="new passwords for the MLflow accounts, written over STATE/*.credentials (no grid may be running)",
    )


def run(args: argparse.Namespace) -> None:
    from klrl.tracking.mlflow_accounts import JOBS_FILE
    from klrl.tracking.mlflow_process import stop_on_signals
    from klrl.tracking.server import tracking_server
    from klrl.tracking.server_host import clear_http_warning, jobs_uri

    stop_on_signals()
    auth, rotate = not args.no_auth, args.rotate_credentials
    with tracking_server(args.state, args.host, args.port, args.workers, auth, rotate, args.plain_http):
        if clear_http_warning(args.host):
            print(clear_http_warning(args.host), file=sys.stderr, flush=True)
        credentials = f", tracking.credentials: {(args.state / JOBS_FILE).resolve()}" if auth else ""
        print(
            f"MLflow tracking server on PostgreSQL: in a config, tracking.uri: {jobs_uri(args.host, args.port)}"
            f"{credentials} (or MLFLOW_TRACKING_URI in the shell that starts the grid; Ctrl-C or kill stops it)",
            flush=True,
        )
        signal.pause()
