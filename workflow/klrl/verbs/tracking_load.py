"""`klrl tracking-load`: a tracking store under many concurrent writer processes, every row
counted back (klrl.tracking.load); exit status 1 when anything was lost."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HELP = "check a tracking store under many concurrent writer processes, every row counted"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--uri", required=True, help="the store: a tracking server (http://...) or sqlite:///<file>")
    parser.add_argument("--writers", type=int, default=32, help="concurrent writer processes")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each writer logs")
    parser.add_argument("--artifact-every", type=int, default=10, help="a file every this many steps")
    parser.add_argument("--report", type=Path, help="write the figures here as JSON")
    parser.add_argument(
        "--credentials", type=Path, help="an authenticated server's credentials file (klrl tracking-server's STATE)"
    )


def run(args: argparse.Namespace) -> None:
    from klrl.tracking.credentials import use_credentials
    from klrl.tracking.load import load

    use_credentials(args.credentials)  # the writers, forked, inherit it
    if not (args.uri.startswith(("http://", "https://", "sqlite:///"))):
        raise ValueError(f"--uri {args.uri!r}: a tracking server (http://...) or a SQLite store (sqlite:///...)")
    figures = load(args.uri, args.writers, args.seconds, args.artifact_every)
    for name, value in figures.items():
        print(f"{name}: {value}")
    if args.report:
        args.report.write_text(json.dumps(figures, indent=2) + "\n")
    if (
        figures["writers_failed"]
        or figures["rows_lost"]
        or figures["rows_duplicated"]
        or figures["files_lost"]
        or figures["params_lost"]
    ):
        sys.exit(1)
