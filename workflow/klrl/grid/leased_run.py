"""A command run under a GPU lease, for as long as any process it started runs.

The lease's `flock`s (klrl.grid.lease_locks) belong to open files: they last while a descriptor
of them is open. The command inherits them, but torchrun's workers, and any child started with
close_fds (Python's default), hold none; so the lease is held by this process, which stays the
command's parent instead of becoming the command. It asks the kernel to be the subreaper of
everything the command starts (PR_SET_CHILD_SUBREAPER, Linux): a process whose parent dies,
torchrun's workers after `kill -9` of their agent included, becomes this process's child rather
than init's. When the command ends, however it ends, what it left running gets SIGTERM, and
SIGKILL after ORPHAN_GRACE_S; the locks are released once this process has no child left, that
is once the last process of the job is gone. SIGTERM, SIGINT and SIGHUP sent to this process are
passed to the command, whose own handling (torchrun stops its workers) goes first.

Where it does not hold: SIGKILL of this process itself leaves the locks to the command's own
inherited descriptors (its workers' are closed); a process that leaves the job's tree by other
means than its parent dying (a double fork does not: the subreaper receives it) is not waited for.
Without PR_SET_CHILD_SUBREAPER (not Linux) orphans become init's and are not waited for.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from klrl.grid.gpu_leases import VISIBLE, gpu_pool, lease_folder
from klrl.grid.lease_locks import acquire

ORPHAN_GRACE_S = 10.0  # between SIGTERM and SIGKILL of what the command left running
PR_SET_CHILD_SUBREAPER = 36
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def run_leased(count: int, command: list[str], environ: Mapping[str, str] = os.environ) -> int:
    """Run `command` holding `count` GPUs of the pool, with CUDA_VISIBLE_DEVICES naming them (in
    the pool's order), until it and every process it started have ended: its exit status
    (128 + the signal's number where a signal ended it). A command of no GPUs replaces this process."""
    if count <= 0:
        os.execvpe(command[0], command, dict(environ))
    pool = gpu_pool(environ)
    held = acquire(count, pool, lease_folder(environ), waiting=lambda: _say_waiting(count, pool))
    _become_subreaper()
    started: list[subprocess.Popen] = []
    for number in FORWARDED:
        signal.signal(number, lambda received, _frame: _forward(started, received))
    job = subprocess.Popen(command, env=dict(environ) | {VISIBLE: ",".join(held)}, pass_fds=tuple(held.values()))
    started.append(job)
    code = job.wait()
    _end_orphans()
    return 128 - code if code < 0 else code


def _say_waiting(count: int, pool: list[str]) -> None:
    print(f"gpu-lease: waiting for {count} of the GPUs {','.join(pool)} to be free", flush=True)


def _become_subreaper() -> None:
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _forward(started: list[subprocess.Popen], received: int) -> None:
    """A signal to this process, passed to the command once it runs (before, it ends this one)."""
    if not started:
        raise SystemExit(128 + received)
    if started[0].returncode is None:
        started[0].send_signal(received)


def _end_orphans() -> None:
    """SIGTERM to every process still under this one, SIGKILL to what outlives the grace,
    reaping each (they are this process's children once their parents are gone) until none is left."""
    _signal_all(signal.SIGTERM)
    deadline = time.monotonic() + ORPHAN_GRACE_S
    while True:
        try:
            reaped, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if reaped == 0:
            if time.monotonic() > deadline:
                _signal_all(signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.05)


def _signal_all(number: int) -> None:
    for pid in _descendants(os.getpid()):
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            pass


def _descendants(root: int) -> list[int]:
    """The processes under `root` (from /proc: each one's parent)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, waiting = [], [root]
    while waiting:
        below = children.get(waiting.pop(), [])
        found += below
        waiting += below
    return found
