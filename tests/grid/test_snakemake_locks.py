"""Snakemake's locks left by a Snakemake killed with -9 are removed when their recorded owner is
gone; live owners' locks, other hosts' and unrecorded ones stay (klrl.grid.snakemake_locks)."""

import json
import socket
import subprocess
import sys

from klrl.grid.snakemake_locks import own_locks, release_stale_locks


def _dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    return int(done.stdout)


def test_only_the_locks_of_a_dead_owner_on_this_host_are_released(tmp_path):
    for name in ("0.input.lock", "0.output.lock", "1.input.lock", "2.output.lock", "3.input.lock"):
        (tmp_path / name).write_text("results/x\n")
    (tmp_path / "1.input.lock.owner").write_text(json.dumps({"pid": _dead_pid(), "host": socket.gethostname()}))
    (tmp_path / "2.output.lock.owner").write_text(json.dumps({"pid": _dead_pid(), "host": "another-node"}))
    (tmp_path / "3.input.lock.owner").write_text(json.dumps({"pid": _dead_pid(), "host": socket.gethostname()}))
    assert [path.name for path in own_locks(tmp_path)] == ["0.input.lock", "0.output.lock"]  # this live process's
    assert (
        json.loads((tmp_path / "0.input.lock.owner").read_text())["pid"]
        != json.loads((tmp_path / "1.input.lock.owner").read_text())["pid"]
    )
    assert [path.name for path in release_stale_locks(tmp_path)] == ["1.input.lock", "3.input.lock"]
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "0.input.lock",
        "0.input.lock.owner",
        "0.output.lock",
        "0.output.lock.owner",
        "2.output.lock",
        "2.output.lock.owner",
    ]
