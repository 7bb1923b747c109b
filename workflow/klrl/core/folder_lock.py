"""One writer per output folder: a lock file that names its holder, and stale ones taken over.

`hold_lock(path)` creates `path` exclusively (O_CREAT | O_EXCL, atomic also on NFS v3+) with
the holder's pid, host and start time, and removes it on exit. A second process is refused
with `FolderLocked`, whose message names the holder. A lock left by a process that no longer
exists on this host (killed with -9) is stale: it is moved aside (a rename only one process
can win) and taken over. A lock held on another host is never taken over: its process cannot
be checked from here; the message says so and which file to delete once that job is gone.
`lock_is_held(path)` asks the same question without taking the lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path


class FolderLocked(ValueError):
    """Another live process holds the folder's lock."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holder(path: Path) -> dict | None:
    """The lock's record, or None if it vanished or is not readable (a lock being written)."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def holder_record() -> dict:
    """What a lock file says of its holder, this process: pid, host and since when."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def _acquire(path: Path) -> bool:
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(descriptor, "w") as handle:
        handle.write(json.dumps(holder_record()) + "\n")
    return True


def lock_is_held(path: Path) -> bool:
    """Whether a live process may hold the lock `path`: its holder runs on this host, or runs
    on another host (not checkable from here), or the lock is being written."""
    if not Path(path).exists():
        return False
    holder = _holder(Path(path))
    if holder is None:
        return Path(path).exists()
    pid = holder.get("pid")
    return holder.get("host") != socket.gethostname() or not isinstance(pid, int) or _alive(pid)


@contextlib.contextmanager
def hold_lock(path: Path, what: str) -> Iterator[None]:
    """Hold the lock file `path` for the duration; `what` names the guarded thing in errors."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(3):
        if _acquire(path):
            break
        holder = _holder(path)
        if holder is None:  # half-written by a process starting right now, or just released
            time.sleep(0.2)
            holder = _holder(path)
            if holder is None and path.exists():
                raise FolderLocked(
                    f"{what}: locked by another process ({path} is unreadable; delete it if no job is running)"
                )
            continue
        here = holder.get("host") == socket.gethostname()
        pid = holder.get("pid")
        if here and isinstance(pid, int) and not _alive(pid):
            try:  # stale: only one process wins this rename
                path.rename(path.with_name(f"{path.name}.stale.{os.getpid()}"))
            except FileNotFoundError:
                continue
            path.with_name(f"{path.name}.stale.{os.getpid()}").unlink()
            continue
        where = (
            "this host"
            if here
            else f"host {holder.get('host')} (not checkable from here; delete {path} once it is gone)"
        )
        raise FolderLocked(f"{what}: in use by pid {pid} on {where} since {holder.get('since')}")
    else:
        raise FolderLocked(f"{what}: could not take {path} (contended)")
    try:
        yield
    finally:
        if (_holder(path) or {}).get("pid") == os.getpid():
            path.unlink(missing_ok=True)
