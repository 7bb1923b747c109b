"""The lock files of GPU leases: one folder a node that every user of it leases from, and
exclusive `flock`s on its files, taken all or none.

The folder (KLRL_GPU_LEASES, default <tmp>/klrl-gpu-leases) is made as /tmp is, sticky and
writable by all (1777), so that any user makes the lock file of a device the first time it is
leased and no user but a file's owner (and the folder's) can remove or replace it. A lock file
is made readable by all (0644, whatever the umask) and opened read-only (`flock` needs no
more), so a folder whose lock files exist serves users who may not write there, a folder made
read-only by an administrator included.

A folder that another user can prepare is not trusted further than that: a folder or lock file
that is a symbolic link is refused (opened with O_NOFOLLOW), so is a lock file that is not a
plain file or has another name elsewhere (a hard link); a lock file is made only where none
exists (O_EXCL) and never written, so no planted name makes a lease create or change a file
elsewhere; a folder that others may write without the sticky bit is refused, as its files could
be swapped under a lease. What no lock can prevent: a user of the node who holds a lock file's
`flock` holds that device, as a lease does.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

LOCKS_ENV = "KLRL_GPU_LEASES"  # the folder of the lock files (default: <tmp>/klrl-gpu-leases)
GUARD = "acquire.lock"


def lock_folder(environ: Mapping[str, str] = os.environ) -> Path:
    return Path(environ.get(LOCKS_ENV) or Path(tempfile.gettempdir()) / "klrl-gpu-leases")


def lock_name(device: str) -> str:
    """The lock file's name of a device id: 'gpu-0.lock', 'gpu-GPU-ab12.lock'."""
    return f"gpu-{re.sub(r'[^A-Za-z0-9_.-]', '_', device)}.lock"


@contextlib.contextmanager
def _umask(mask: int):
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def open_folder(folder: Path) -> int:
    """A descriptor of `folder` (made 1777 where missing, as is each missing folder above it, so
    that the node folder of a SLURM allocation's is every user's), refused where it is a symbolic
    link, not a folder, or writable by others without the sticky bit."""
    for missing in reversed([path for path in [folder, *folder.parents] if not path.exists()]):
        with _umask(0), contextlib.suppress(FileExistsError):
            missing.mkdir(mode=0o1777)
    try:
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise OSError(f"GPU lease folder {folder}: not a folder (a symbolic link?); remove it or set {LOCKS_ENV}")
        raise OSError(f"GPU lease folder {folder}: {error.strerror}") from None
    mode = os.fstat(descriptor).st_mode
    if mode & (stat.S_IWGRP | stat.S_IWOTH) and not mode & stat.S_ISVTX:
        os.close(descriptor)
        raise OSError(
            f"GPU lease folder {folder}: writable by others without the sticky bit (mode {stat.S_IMODE(mode):o}),"
            f" so its lock files could be swapped; chmod +t it or set {LOCKS_ENV}"
        )
    return descriptor


def open_lock(folder: int, name: str, shown: Path) -> int:
    """A read-only descriptor of the lock file `name` in the folder's descriptor, made (0644)
    where missing; `shown` is its path, for messages."""
    while True:
        try:
            descriptor = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
        except FileNotFoundError:
            try:
                with _umask(0):
                    flags = os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                    descriptor = os.open(name, flags, 0o644, dir_fd=folder)
            except FileExistsError:
                continue  # another lease made it first
            except OSError as error:
                raise OSError(f"GPU lease file {shown}: cannot be made ({error.strerror})") from None
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise OSError(f"GPU lease file {shown}: a symbolic link, refused; remove it") from None
            raise OSError(f"GPU lease file {shown}: {error.strerror}") from None
        found = os.fstat(descriptor)
        if not stat.S_ISREG(found.st_mode) or found.st_nlink != 1:
            os.close(descriptor)
            raise OSError(f"GPU lease file {shown}: not a plain file of one name, refused; remove it")
        return descriptor


def acquire(
    count: int, pool: list[str], folder: Path, poll: float = 0.5, waiting: Callable[[], None] = lambda: None
) -> dict[str, int]:
    """Exclusive locks on `count` devices of `pool`, all or none, taken under one guard lock (so
    that two jobs never each hold part of what the other needs): {device id: open descriptor}.
    Waits, polling, while fewer are free, calling `waiting` once."""
    if count > len(pool):
        raise ValueError(f"{count} GPUs asked; this machine's pool has {len(pool)} ({','.join(pool) or 'none'})")
    directory = open_folder(folder)
    try:
        guard = open_lock(directory, GUARD, folder / GUARD)
        locks = {device: open_lock(directory, lock_name(device), folder / lock_name(device)) for device in pool}
    finally:
        os.close(directory)
    told = False
    try:
        while True:
            with _held(guard):
                free = [device for device in pool if _try_lock(locks[device])]
                if len(free) >= count:
                    for device in free[count:]:
                        fcntl.flock(locks[device], fcntl.LOCK_UN)
                    taken = {device: locks.pop(device) for device in free[:count]}
                    return taken
                for device in free:
                    fcntl.flock(locks[device], fcntl.LOCK_UN)
            if not told:
                waiting()
                told = True
            time.sleep(poll)
    finally:
        for descriptor in [guard, *locks.values()]:
            os.close(descriptor)


@contextlib.contextmanager
def _held(descriptor: int):
    fcntl.flock(descriptor, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(descriptor, fcntl.LOCK_UN)


def _try_lock(descriptor: int) -> bool:
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
