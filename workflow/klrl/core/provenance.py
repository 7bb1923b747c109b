"""Where a run's cells came from: the commit and the time each cell finished training.

The trainer writes both into the cell's status.json (`commit`: the short hash of the code the
trainer ran from, `finished`: UTC, ISO 8601). The code's commit is read from git in a checkout;
in a source archive made by `git archive` (a release tarball), which has no .git, from
ARCHIVE_COMMIT, which git fills in as it writes the archive (export-subst in .gitattributes);
anywhere else it is NOT_A_CHECKOUT. `commit_rows` groups a run's cells by commit,
with the count and the first and last finishing dates, so a generated block of docs/results.md can name
every commit its cells ran at; cells whose status.json predates these fields count as `unrecorded`.
"""

from __future__ import annotations

import datetime
import subprocess
from pathlib import Path

UNRECORDED = "unrecorded"
PROVENANCE_COLUMNS = ("commit", "cells", "first_finished", "last_finished")
NOT_A_CHECKOUT = "not a git checkout"
# `git archive` writes the archived commit's short hash here; a checkout keeps the placeholder.
ARCHIVE_COMMIT = "$Format:%h$"


def source_commit(folder: Path = Path(__file__).parent) -> str:
    """The short commit hash of the code that runs: that of the `git archive` it was unpacked
    from, else that of the git checkout holding `folder`, else NOT_A_CHECKOUT (no checkout, no git)."""
    if not ARCHIVE_COMMIT.startswith("$Format"):
        return ARCHIVE_COMMIT
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return NOT_A_CHECKOUT
    return done.stdout.strip() if done.returncode == 0 else NOT_A_CHECKOUT


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
