"""Rows per second that 32 writer processes log to the tracking server with its passwords (MLflow's
basic-auth app, the jobs' user) against the same server without authentication (`--no-auth`),
in one sitting, interleaved (auth, none, auth, none, ...), each load checked row by row
(`klrl tracking-load`: nothing lost, duplicated or failed).

    python benchmarks/tracking_auth.py [--writers 32 --seconds 10 --rounds 2 --workers 2]

Both servers (PostgreSQL and `mlflow server`, STATE under a temporary folder) run for the whole
sitting; only one is loaded at a time.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, markdown_table, median, verdict  # noqa: E402

from klrl.tracking.credentials import use_credentials  # noqa: E402
from klrl.tracking.load import load  # noqa: E402
from klrl.tracking.mlflow_accounts import JOBS_FILE  # noqa: E402
from klrl.tracking.server import tracking_server  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2, help="each server's worker processes")
    args = parser.parse_args()
    print(machine())
    rows, figures = [], {"auth": [], "none": []}
    with tempfile.TemporaryDirectory(prefix="klrl-bench-auth-") as scratch, contextlib.ExitStack() as servers:
        Path(scratch).chmod(0o755)  # as root PostgreSQL runs as `postgres`, which must reach STATE
        addresses = {
            "auth": servers.enter_context(tracking_server(Path(scratch) / "auth", workers=args.workers)),
            "none": servers.enter_context(tracking_server(Path(scratch) / "none", workers=args.workers, auth=False)),
        }
        for round_ in range(args.rounds):
            for side in ("auth", "none"):
                use_credentials(Path(scratch) / "auth" / JOBS_FILE if side == "auth" else None)
                result = load(addresses[side], args.writers, args.seconds)
                figures[side].append(result)
                lost = result["rows_lost"] + result["rows_duplicated"] + result["files_lost"] + result["params_lost"]
                rows.append(
                    [round_ + 1, side, result["rows_arrived"], lost, result["writers_failed"], result["rows_per_s"]]
                )
                print(rows[-1], flush=True)
    print(markdown_table(["round", "authentication", "rows", "lost or doubled", "writers failed", "rows/s"], rows))
    speed = {side: median([result["rows_per_s"] for result in results]) for side, results in figures.items()}
    ratio = speed["auth"] / speed["none"]
    print(f"median rows/s: with passwords {speed['auth']:.1f}, without {speed['none']:.1f} ({ratio:.2f}x)")
    clean = all(
        not (result["rows_lost"] or result["rows_duplicated"] or result["files_lost"] or result["writers_failed"])
        for result in figures["auth"]
    )
    verdict("nothing lost with authentication", f"{len(figures['auth'])} loads of {args.writers} writers", clean)


if __name__ == "__main__":
    main()
