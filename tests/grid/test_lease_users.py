"""Several Unix users leasing GPUs of one node (klrl.grid.lease_locks): two users made by the
test lease from one folder under umask 022; a read-only folder whose lock files exist serves a
user who may not write there; names planted in the folder by another user are refused and make
nothing elsewhere. The users' tests need root (CI runs as root) and are skipped otherwise."""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import klrl
import pytest
from klrl.grid.gpu_leases import VISIBLE
from klrl.grid.lease_locks import GUARD, LOCKS_ENV, acquire, lock_name

as_root = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("useradd"), reason="creating Unix users for the test needs root"
)

# A leased job: writes its devices, then holds them until its stop file appears.
_JOB = """
import os, sys, time
with open(sys.argv[1] + ".part", "w") as file:  # renamed when written: a reader never sees it half made
    file.write(os.environ["CUDA_VISIBLE_DEVICES"])
os.rename(sys.argv[1] + ".part", sys.argv[1])
while not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
"""


@pytest.fixture
def shared():
    """A folder every user reaches (under /tmp, 0755): a copy of the klrl package, which other
    users could not import from a checkout under a closed home, and `tmp`, writable by all as
    /tmp is (1777), for lock folders and the jobs' records."""
    folder = Path(tempfile.mkdtemp(prefix="klrl-lease-users-"))
    folder.chmod(0o755)
    shutil.copytree(Path(klrl.__file__).parent, folder / "code" / "klrl", ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "tmp").mkdir()
    (folder / "tmp").chmod(0o1777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def users():
    """Two Unix users made for the test, removed after."""
    names = [f"klrl-lease-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    made = []
    try:
        for name in names:
            subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True)
            made.append(name)
        yield names
    finally:
        for name in made:
            subprocess.run(["userdel", name], check=False)


def _python_for(user: str) -> str:
    """An interpreter `user` may run: this one's, else the system's."""
    for candidate in (os.path.realpath(sys.executable), "/usr/bin/python3"):
        try:
            if subprocess.run([candidate, "-c", "pass"], user=user, capture_output=True).returncode == 0:
                return candidate
        except PermissionError:  # under a home closed to others
            pass
    pytest.skip("no Python interpreter that another user may run")


def _lease_as(user: str, shared: Path, locks: Path, count: int, name: str, **options) -> subprocess.Popen:
    python = _python_for(user)
    environ = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(shared / "code"),
        VISIBLE: "0,1,2,3",
        LOCKS_ENV: str(locks),
    }
    command = [python, "-m", "klrl", "gpu-lease", "--gpus", str(count), "--"]
    command += [python, "-c", _JOB, str(shared / "tmp" / f"{name}.devices"), str(shared / "tmp" / "stop")]
    return subprocess.Popen(command, user=user, env=environ, umask=0o022, cwd="/", text=True, **options)


def _wait_for(path: Path, process: subprocess.Popen, seconds: float = 60) -> str:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if process.poll() is not None:
            raise AssertionError(f"the lease ended with {process.returncode}: {process.stderr.read()}")
        assert time.monotonic() < deadline, f"no {path.name} within {seconds} s"
        time.sleep(0.05)
    return path.read_text()


@as_root
def test_two_users_lease_from_one_folder_the_first_of_them_made(shared, users):
    """User one makes the folder (default mode, umask 022) and holds 2 of 4 devices; user two
    gets the other 2, and a third lease of user two's waits until user one's ends."""
    first, second = users
    locks = shared / "tmp" / "klrl-gpu-leases"
    leases = [_lease_as(first, shared, locks, 2, "one", stderr=subprocess.PIPE)]
    try:
        one = _wait_for(shared / "tmp" / "one.devices", leases[0])
        leases.append(_lease_as(second, shared, locks, 2, "two", stderr=subprocess.PIPE))
        two = _wait_for(shared / "tmp" / "two.devices", leases[1])
        assert sorted(one.split(",") + two.split(",")) == ["0", "1", "2", "3"]
        leases.append(_lease_as(second, shared, locks, 1, "three", stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        time.sleep(2)
        assert not (shared / "tmp" / "three.devices").exists()  # all 4 held: it waits
        (shared / "tmp" / "stop").touch()
        assert [lease.wait(timeout=60) for lease in leases] == [0, 0, 0]
        assert "waiting for 1 of the GPUs 0,1,2,3 to be free" in leases[2].stdout.read()
    finally:
        (shared / "tmp" / "stop").touch()
        for lease in leases:
            lease.kill() if lease.poll() is None else None
            lease.wait()


@as_root
def test_a_read_only_folder_whose_lock_files_exist_serves_a_user_who_cannot_write_it(shared, users):
    locks = shared / "prepared"
    locks.mkdir(mode=0o755)  # an administrator's: root's, closed to others' writes
    for name in [GUARD, *(lock_name(device) for device in "0123")]:
        (locks / name).touch(mode=0o644)
    lease = _lease_as(users[0], shared, locks, 3, "one", stderr=subprocess.PIPE)
    try:
        assert _wait_for(shared / "tmp" / "one.devices", lease) == "0,1,2"
    finally:
        (shared / "tmp" / "stop").touch()
        lease.wait(timeout=60)
    assert lease.returncode == 0


def test_names_planted_in_the_folder_are_refused_and_make_nothing_elsewhere(tmp_path):
    """A lock file planted as a symbolic link (to a file that does not exist yet) or as a hard
    link, and a folder that is a symbolic link or that others may write without the sticky
    bit: each refused in one line, and the link's target neither made nor changed."""
    locks, target = tmp_path / "locks", tmp_path / "target"
    locks.mkdir(mode=0o1777)
    locks.chmod(0o1777)
    (locks / lock_name("0")).symlink_to(target)
    with pytest.raises(OSError, match=r"^GPU lease file .*/gpu-0\.lock: a symbolic link, refused; remove it$"):
        acquire(1, ["0"], locks)
    assert not target.exists() and not target.is_symlink()

    (locks / lock_name("0")).unlink()
    target.write_text("kept")
    os.link(target, locks / lock_name("0"))
    with pytest.raises(OSError, match=r"^GPU lease file .*/gpu-0\.lock: not a plain file of one name"):
        acquire(1, ["0"], locks)
    assert target.read_text() == "kept"

    (tmp_path / "linked").symlink_to(locks)
    with pytest.raises(OSError, match=r"^GPU lease folder .*/linked: not a folder \(a symbolic link\?\)"):
        acquire(1, ["1"], tmp_path / "linked")
    locks.chmod(0o777)
    with pytest.raises(OSError, match=r"^GPU lease folder .*/locks: writable by others without the sticky bit"):
        acquire(1, ["1"], locks)


def test_the_folder_a_lease_makes_is_sticky_and_its_lock_files_readable_by_all(tmp_path):
    previous = os.umask(0o077)
    try:
        held = acquire(1, ["0"], tmp_path / "locks" / "slurm-7")  # an allocation's, in the node's
    finally:
        os.umask(previous)
    for descriptor in held.values():
        os.close(descriptor)
    assert [(tmp_path / name).stat().st_mode & 0o7777 for name in ("locks", "locks/slurm-7")] == [0o1777, 0o1777]
    assert {path.name: path.stat().st_mode & 0o777 for path in (tmp_path / "locks" / "slurm-7").iterdir()} == {
        GUARD: 0o644,
        lock_name("0"): 0o644,
    }
