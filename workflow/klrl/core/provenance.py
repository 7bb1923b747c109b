"""Where a run's cells came from: the commit and the time each cell finished training.

The trainer writes both into the cell's status.json (`commit`: the short hash of the checkout
the trainer ran from, `finished`: UTC, ISO 8601). `commit_rows` groups a run's cells by commit,
with the count and the first and last finishing dates, so a generated README block can name
every commit its cells ran at; cells whose status.json predates these fields count as `unrecorded`.
"""

from __future__ import annotations

import datetime
import subprocess
from pathlib import Path

UNRECORDED = "unrecorded"
PROVENANCE_COLUMNS = ("commit", "cells", "first_finished", "last_finished")


def source_commit(folder: Path = Path(__file__).parent) -> str:
    """The short commit hash of the git checkout holding `folder` ('unknown' outside one)."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=30
        )
    except OSError:
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def commit_rows(statuses: list[dict]) -> list[dict]:
    """Per commit, in order of first finishing: the cells trained at it and their first and last
    finishing dates (YYYY-MM-DD). Cells not yet trained (status `missing`) are left out."""
    groups: dict[str, list[str]] = {}
    for status in statuses:
        if status.get("status") in (None, "missing"):
            continue
        groups.setdefault(status.get("commit") or UNRECORDED, []).append((status.get("finished") or "")[:10])
    rows = [
        {"commit": commit, "cells": len(dates), "first_finished": min(dates) or "", "last_finished": max(dates) or ""}
        for commit, dates in groups.items()
    ]
    return sorted(rows, key=lambda row: (row["first_finished"] == "", row["first_finished"], row["commit"]))
