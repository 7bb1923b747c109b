"""GPU leases on one machine (klrl.grid.gpu_leases) on a fake pool of device ids: the paper grid's
job shapes at once through `klrl gpu-lease`, jobs inside a SLURM allocation, the pool and its
limit in the Snakefile (a dry run of config/paper.yaml with the pool at 8 and at 4)."""

import json
import os
import subprocess
import sys

import pytest
from klrl.grid.expansion import expand_grid
from klrl.grid.gpu_leases import VISIBLE, gpu_limit, gpu_pool, lease_prefix
from klrl.grid.lease_locks import LOCKS_ENV
from workflow_helpers import PAPER_MACHINE, ROOT, copy_workflow, job_counts, load_config, snakemake, train_commands

POOL = [str(device) for device in range(8)]

# A job: records when it ran and what it saw, and checks that each of its devices' lock files is
# locked (by its own lease) while it runs.
_JOB = """
import fcntl, json, os, sys, time
record, name, locks = sys.argv[1:]
devices = os.environ["CUDA_VISIBLE_DEVICES"].split(",")
held = []
for device in devices:
    descriptor = os.open(f"{locks}/gpu-{device}.lock", os.O_RDWR)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.append(False)
    except BlockingIOError:
        held.append(True)
    os.close(descriptor)
open(f"{record}.{name}.started", "w").close()
start = time.monotonic()
time.sleep(float(os.environ.get("JOB_SECONDS", "0.4")))
line = {"name": name, "devices": devices, "locked": held, "start": start, "end": time.monotonic()}
with open(record, "a") as out:
    out.write(json.dumps(line) + "\\n")
"""

_SHOW = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"


def _environ(tmp_path, pool=POOL):
    return os.environ | {VISIBLE: ",".join(pool), LOCKS_ENV: str(tmp_path / "locks")}


def _leased(count, command, environ):
    return subprocess.Popen(
        [sys.executable, "-m", "klrl", "gpu-lease", "--gpus", str(count), "--", *command], env=environ
    )


def test_the_paper_grids_job_shapes_at_once_never_share_a_device(tmp_path):
    """Train jobs of 8 and 4 GPUs and evaluation jobs of 1, all started at once on a pool of 8:
    each sees exactly its own count of ids, holds their locks while it runs, and no device is
    held by two jobs at any moment (so never more than 8 at once)."""
    environ = _environ(tmp_path)
    record = tmp_path / "jobs.jsonl"
    shapes = [8, 4, 4, 1, 1, 1, 1, 8, 4, 1, 1, 1, 1, 1, 1]
    jobs = [
        _leased(count, [sys.executable, "-c", _JOB, str(record), f"job{index}", environ[LOCKS_ENV]], environ)
        for index, count in enumerate(shapes)
    ]
    assert [job.wait(timeout=300) for job in jobs] == [0] * len(jobs)
    lines = {line["name"]: line for line in map(json.loads, record.read_text().splitlines())}
    assert len(lines) == len(shapes)
    for index, count in enumerate(shapes):
        line = lines[f"job{index}"]
        assert len(line["devices"]) == len(set(line["devices"])) == count
        assert set(line["devices"]) <= set(POOL) and all(line["locked"])
    moments = sorted({line["start"] for line in lines.values()})
    for moment in moments:
        running = [line for line in lines.values() if line["start"] <= moment < line["end"]]
        devices = [device for line in running for device in line["devices"]]
        assert len(devices) == len(set(devices)) <= len(POOL)


def test_the_pool_is_cuda_visible_devices_as_cuda_reads_it():
    assert gpu_pool({VISIBLE: "3,5,GPU-ab12"}) == ["3", "5", "GPU-ab12"]
    assert gpu_pool({VISIBLE: "0,1,-1,2"}) == ["0", "1"]
    assert gpu_pool({VISIBLE: ""}) == []
    assert gpu_pool({"SLURM_JOB_ID": "7", "SLURM_JOB_GPUS": "4,5"}) == ["4", "5"]  # the allocation's
    assert gpu_pool({"SLURM_JOB_ID": "7"}) == []  # an allocation without GPUs: never the node's others


def test_a_job_asking_for_more_gpus_than_the_pool_is_refused_naming_it_and_both_counts():
    requests = [("evaluate job of a", 1), ("train job of b", 8), ("train job of c", 8)]
    assert gpu_limit(requests, None, {VISIBLE: ",".join(POOL)}) == 8
    with pytest.raises(ValueError) as refused:
        gpu_limit(requests, None, {VISIBLE: "0,1,2,3"})
    assert str(refused.value) == (
        "train job of b asks for 8 GPUs; this machine has 4 (CUDA_VISIBLE_DEVICES=0,1,2,3) (and 1 more jobs)"
    )
    with pytest.raises(ValueError, match=r"^train job of b asks for 8 GPUs; this machine has 2 \(Snakemake's"):
        gpu_limit(requests, 2, {VISIBLE: ",".join(POOL)})
    assert gpu_limit([("train job of a", 0)], None, {}) == 0  # a CPU grid asks for no pool
    with pytest.raises(ValueError) as refused:  # --resources gpu=8 on 4 devices: refused at load, not at lease
        gpu_limit(requests, 8, {VISIBLE: "0,1,2,3"})
    assert str(refused.value).startswith("train job of b asks for 8 GPUs; this machine has 4 (CUDA_VISIBLE_DEVICES")
    assert gpu_limit(requests, 1000, {VISIBLE: ""}) == 1000  # no devices here (profiles/slurm): SLURM assigns


def test_a_lease_of_zero_gpus_keeps_the_environment(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "klrl", "gpu-lease", "--gpus", "0", "--", sys.executable, "-c", _SHOW],
        env=_environ(tmp_path, ["0", "1"]),
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout == "0,1\n"
    assert not (tmp_path / "locks").exists()


def test_jobs_inside_a_slurm_allocation_lease_its_devices(tmp_path):
    """The local profile inside `salloc`: two 1-GPU jobs at once get different devices of the
    allocation's (SLURM_JOB_GPUS where CUDA_VISIBLE_DEVICES is unset), in a lock folder of the
    allocation's own; a job asking for all of them keeps SLURM's order (profiles/slurm)."""
    environ = {**os.environ, "SLURM_JOB_ID": "77", "SLURM_JOB_GPUS": "4,5", "JOB_SECONDS": "3"}
    environ[LOCKS_ENV] = str(tmp_path / "locks")
    environ.pop(VISIBLE, None)
    record = tmp_path / "jobs.jsonl"
    jobs = [
        _leased(
            1, [sys.executable, "-c", _JOB, str(record), f"job{index}", str(tmp_path / "locks" / "slurm-77")], environ
        )
        for index in range(2)
    ]
    assert [job.wait(timeout=120) for job in jobs] == [0, 0]
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert sorted(device for line in lines for device in line["devices"]) == ["4", "5"]
    assert lines[0]["start"] < lines[1]["end"] and lines[1]["start"] < lines[0]["end"]  # at once
    whole = subprocess.run(
        [sys.executable, "-m", "klrl", "gpu-lease", "--gpus", "2", "--", sys.executable, "-c", _SHOW],
        env=environ | {VISIBLE: "1,0"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert whole.stdout == "1,0\n"


@pytest.mark.slow
def test_the_paper_grid_plans_every_gpu_job_at_its_full_count_on_a_pool_of_8_and_stops_on_4(tmp_path):
    folder = copy_workflow(tmp_path)
    args = ("-n", "-p", "--profile", "profiles/local", "--configfile", "config/paper.yaml")
    eight = snakemake(folder, *args, environ=PAPER_MACHINE)
    assert eight.returncode == 0, eight.stderr[-3000:]
    cells = expand_grid(load_config("paper"))
    four = sum(cell.model == "qwen3-4b-instruct" for cell in cells.values())
    assert job_counts(eight.stdout)["train"] == len(cells)
    assert eight.stdout.count("gpu=8") == len(cells) - four and eight.stdout.count("gpu=4") == four
    commands = train_commands(eight.stdout)
    assert commands.count(f"{lease_prefix(8)} torchrun --standalone --nproc_per_node 8 -m klrl") == len(cells) - four
    assert commands.count(f"{lease_prefix(4)} torchrun --standalone --nproc_per_node 4 -m klrl") == four
    assert eight.stdout.count(f"{lease_prefix(1)} python -m klrl evaluate") == len(cells) + 3  # and the 3 bases
    refused = snakemake(folder, *args, environ=PAPER_MACHINE | {VISIBLE: "0,1,2,3"})
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines()[-1] == (
        f"train job of {next(iter(cells))} asks for 8 GPUs; this machine has 4 (CUDA_VISIBLE_DEVICES=0,1,2,3)"
        f" (and {len(cells) - four - 1} more jobs)"
    )


def test_the_readme_and_the_runbook_give_the_single_node_command_tested_here():
    command = "snakemake --profile profiles/local --configfile config/paper.yaml"
    assert command in (ROOT / "README.md").read_text() and command in (ROOT / "docs" / "paper-scale.md").read_text()
