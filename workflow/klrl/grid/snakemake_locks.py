"""Snakemake's directory locks after Snakemake itself was killed with -9.

Snakemake locks the files a run reads and writes (.snakemake/locks/<n>.input.lock and
<n>.output.lock) and removes the locks when it ends; killed with -9 it cannot, and the next run
stops with "Directory cannot be locked" until someone runs `--unlock`. So the workflow's onstart
handler, which Snakemake calls once it holds its locks, writes beside each lock it finds without
an owner a `<lock>.owner` naming this process (pid, host, start: klrl.core.folder_lock's record), and
when the workflow is read again by a new main process, every lock whose owner no longer runs on
this host is removed, with its owner file. A lock whose owner lives, runs on another host, or is
not recorded (a lock of a dry run, or of Snakemake run without this workflow) is left as it is.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from klrl.core.folder_lock import holder_record, lock_is_held

LOCK_NAME = re.compile(r"[0-9]+\.(input|output)\.lock")
OWNER_SUFFIX = ".owner"


def _locks(folder: Path) -> list[Path]:
    return sorted(path for path in Path(folder).glob("*.lock") if LOCK_NAME.fullmatch(path.name))


def own_locks(folder: Path) -> list[Path]:
    """Record this process as the owner of the locks in `folder` that have none; returns them."""
    owned = []
    for lock in _locks(folder):
        owner = lock.with_name(lock.name + OWNER_SUFFIX)
        if not owner.exists():
            owner.write_text(json.dumps(holder_record()) + "\n")
            owned.append(lock)
    return owned


def release_stale_locks(folder: Path) -> list[Path]:
    """Remove the locks in `folder` whose recorded owner no longer runs on this host; returns them."""
    released = []
    for lock in _locks(folder):
        owner = lock.with_name(lock.name + OWNER_SUFFIX)
        if owner.exists() and not lock_is_held(owner):
            lock.unlink(missing_ok=True)
            owner.unlink(missing_ok=True)
            released.append(lock)
    return released
