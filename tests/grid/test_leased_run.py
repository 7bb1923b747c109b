"""A lease lasts as long as any process of its job (klrl.grid.leased_run): real `torchrun
--nproc-per-node 2` under `klrl gpu-lease` on a fake pool of 4 devices, its agent killed with
SIGKILL while its workers run; a job killed with SIGKILL, and the lease process killed alone."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from klrl.grid.gpu_leases import VISIBLE
from klrl.grid.lease_locks import LOCKS_ENV, acquire

POOL = ["0", "1", "2", "3"]

# A torchrun worker: records its pid and devices, runs until SIGTERM, then takes a second to
# end (as a worker closing its files would) and records when it ended.
_WORKER = """
import json, os, signal, sys, time
folder = sys.argv[1]
rank = os.environ["RANK"]
def ended(*_):
    time.sleep(1)
    open(f"{folder}/worker{rank}.ended", "w").write(json.dumps(time.time()))
    sys.exit(0)
signal.signal(signal.SIGTERM, ended)
line = {"pid": os.getpid(), "devices": os.environ["CUDA_VISIBLE_DEVICES"]}
open(f"{folder}/worker{rank}.json", "w").write(json.dumps(line))
time.sleep(600)
"""

# The next job: records when it got its devices, and which.
_NEXT = """
import json, os, sys, time
open(sys.argv[1], "w").write(json.dumps({"at": time.time(), "devices": os.environ["CUDA_VISIBLE_DEVICES"]}))
"""


def _wait_for(paths, process, seconds=120):
    deadline = time.monotonic() + seconds
    while not all(path.exists() for path in paths):
        assert process.poll() is None, f"the job ended early: {process.returncode}"
        assert time.monotonic() < deadline, f"no {paths} within {seconds} s"
        time.sleep(0.1)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state != "Z"


def _children(pid):
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError):
                pass
    return found


def _command_line(pid):
    return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")


def _lease(count, command, environ):
    verb = [sys.executable, "-m", "klrl", "gpu-lease", "--gpus", str(count), "--", *command]
    return subprocess.Popen(verb, env=environ, start_new_session=True)


@pytest.mark.slow
def test_after_kill_9_of_the_torchrun_agent_the_devices_wait_for_its_last_worker(tmp_path):
    environ = os.environ | {VISIBLE: ",".join(POOL), LOCKS_ENV: str(tmp_path / "locks"), "OMP_NUM_THREADS": "1"}
    (tmp_path / "worker.py").write_text(_WORKER)
    torchrun = [str(Path(sys.executable).parent / "torchrun"), "--standalone", "--nproc-per-node", "2"]
    job = _lease(2, [*torchrun, str(tmp_path / "worker.py"), str(tmp_path)], environ)
    workers = []
    try:
        _wait_for([tmp_path / "worker0.json", tmp_path / "worker1.json"], job)
        workers = [json.loads((tmp_path / f"worker{rank}.json").read_text()) for rank in (0, 1)]
        assert [worker["devices"] for worker in workers] == ["0,1", "0,1"]
        (agent,) = [pid for pid in [job.pid, *_children(job.pid)] if _command_line(pid).split()[1].endswith("torchrun")]
        os.kill(agent, signal.SIGKILL)
        time.sleep(0.5)
        assert all(_alive(worker["pid"]) for worker in workers)  # torchrun's workers outlive their agent
        following = _lease(4, [sys.executable, "-c", _NEXT, str(tmp_path / "next.json")], environ)
        assert following.wait(timeout=120) == 0
        got = json.loads((tmp_path / "next.json").read_text())
        assert got["devices"] == ",".join(POOL)
        ended = [tmp_path / f"worker{rank}.ended" for rank in (0, 1)]
        assert all(path.exists() for path in ended), "the next job got the devices while a worker ran"
        assert got["at"] > max(json.loads(path.read_text()) for path in ended)
        assert job.wait(timeout=60) == 128 + signal.SIGKILL  # the agent's end, as the job's
    finally:
        for worker in workers:
            if _alive(worker["pid"]):
                os.kill(worker["pid"], signal.SIGKILL)
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()


def test_a_job_killed_with_sigkill_returns_its_devices_and_the_lease_process_killed_alone_does_not(tmp_path):
    """SIGKILL of the lease process alone leaves the devices held by the job it runs (which
    inherited the locks); SIGKILL of the job then frees them at once."""
    environ = os.environ | {VISIBLE: ",".join(POOL), LOCKS_ENV: str(tmp_path / "locks")}
    started = tmp_path / "started"
    command = [
        sys.executable,
        "-c",
        f"import os, time; open({str(started)!r}, 'w').write(str(os.getpid())); time.sleep(600)",
    ]
    job = _lease(4, command, environ)
    _wait_for([started], job)
    time.sleep(0.2)
    command_pid = int(started.read_text())
    try:
        job.send_signal(signal.SIGKILL)
        job.wait(timeout=30)
        with pytest.raises(TimeoutError):
            acquire(1, POOL, tmp_path / "locks", poll=0.01, waiting=_refuse)
        os.kill(command_pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while _alive(command_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sorted(acquire(4, POOL, tmp_path / "locks", poll=0.01, waiting=_refuse)) == POOL
    finally:
        if _alive(command_pid):
            os.kill(command_pid, signal.SIGKILL)


def _refuse():
    raise TimeoutError("the devices are held")
