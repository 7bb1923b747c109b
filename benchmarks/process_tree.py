"""A job and every process under it killed at once (SIGKILL), from Linux's /proc: the GPU
check's kill-and-resume stage kills torchrun this way, as a node failure would."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path


def process_tree() -> dict[int, tuple[int, str]]:
    """Every process's parent and state, from Linux's /proc."""
    tree = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended meanwhile
            continue
        tree[int(stat.parent.name)] = (int(fields[1]), fields[0])
    return tree


def kill_job(process: subprocess.Popen) -> None:
    """SIGKILL torchrun and every process under it at once (its workers run in sessions of
    their own, so killing its process group would leave them training), and wait until they
    are gone."""
    tree = process_tree()
    job, queue = [], [process.pid]
    while queue:
        parent = queue.pop()
        job.append(parent)
        queue += [pid for pid, (ppid, _) in tree.items() if ppid == parent]
    for pid in job:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 60
    while any(process_tree().get(pid, (0, "Z"))[1] != "Z" for pid in job) and time.monotonic() < deadline:
        time.sleep(0.05)
