"""GPU leases on one machine: which devices a GPU job of the grid holds while it runs.

Snakemake's `gpu` resource counts GPUs but names none, so on one machine several jobs would
otherwise share GPU 0. Here a job asking for N GPUs takes N devices of the machine's pool, each
by an exclusive `flock` on a lock file of its own (klrl.grid.lease_locks), and runs with
CUDA_VISIBLE_DEVICES naming exactly those, under a process that holds the locks until the last
process the job started has ended (klrl.grid.leased_run).

The pool is CUDA_VISIBLE_DEVICES where set (the environment Snakemake was started with, which
its jobs inherit), else the devices nvidia-smi lists, else those torch counts. Inside a SLURM
allocation (SLURM_JOB_ID set) it is the allocation's: CUDA_VISIBLE_DEVICES, else
SLURM_JOB_GPUS, else none (never the node's other devices), leased in a lock folder of the
allocation's own, as its device ids are its own (under SLURM's device cgroup each allocation
numbers its GPUs from 0). A SLURM job of profiles/slurm asks its allocation for exactly its
count, so it leases all of them, in SLURM's order: SLURM's assignment stands.

The Snakefile sets Snakemake's `gpu` resource to the pool's size (`gpu_limit`), so the scheduler
never starts more than the leases can serve, and refuses at load a job that asks for more GPUs
than the limit, or than a pool of this machine's devices has.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from klrl.grid.lease_locks import lock_folder

VISIBLE = "CUDA_VISIBLE_DEVICES"
SLURM_JOB = "SLURM_JOB_ID"
SLURM_GPUS = "SLURM_JOB_GPUS"


def _device_list(text: str) -> list[str]:
    """A device list as CUDA reads it: up to the first empty or negative id."""
    ids = []
    for device in (part.strip() for part in text.split(",")):
        if not device or device.startswith("-"):
            break
        ids.append(device)
    return ids


def gpu_pool(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The machine's GPU ids: CUDA_VISIBLE_DEVICES's list where set, else (inside a SLURM
    allocation) SLURM_JOB_GPUS's or none, else 0 .. n-1 for the n devices nvidia-smi lists (or
    torch counts)."""
    if VISIBLE in environ:
        return _device_list(environ[VISIBLE])
    if SLURM_JOB in environ:
        return _device_list(environ.get(SLURM_GPUS, ""))
    return [str(index) for index in range(_device_count())]


def _device_count() -> int:
    if shutil.which("nvidia-smi"):
        listed = subprocess.run(["nvidia-smi", "--list-gpus"], capture_output=True, text=True, check=False)
        if listed.returncode == 0:
            return sum(line.startswith("GPU ") for line in listed.stdout.splitlines())
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count()


def pool_text(pool: list[str], environ: Mapping[str, str] = os.environ) -> str:
    """How the pool was found, for messages: '4 (CUDA_VISIBLE_DEVICES=0,1,2,3)'."""
    if VISIBLE in environ:
        source = f"{VISIBLE}={environ[VISIBLE]}"
    elif SLURM_JOB in environ:
        source = f"SLURM job {environ[SLURM_JOB]}'s {SLURM_GPUS}={environ.get(SLURM_GPUS, '')}"
    else:
        source = "the devices of nvidia-smi or torch"
    return f"{len(pool)} ({source})"


def lease_folder(environ: Mapping[str, str] = os.environ) -> Path:
    """Where a lease takes its locks: the node's lock folder, or inside a SLURM allocation a
    folder of the allocation's own in it (slurm-<job id>)."""
    folder = lock_folder(environ)
    return folder / f"slurm-{environ[SLURM_JOB]}" if SLURM_JOB in environ else folder


def gpu_limit(requests: Iterable[tuple[str, int]], given: int | None, environ: Mapping[str, str] = os.environ) -> int:
    """Snakemake's `gpu` resource for jobs asking `requests` ((job, GPUs) pairs): `given` where the
    command line or profile sets it, else the pool's size. A job asking for more than that, or
    (where this machine has devices) more than its pool, is a ValueError naming the job and both
    counts: Snakemake would lower its request silently, or its lease would fail when it starts."""
    requests = list(requests)
    if not any(count > 0 for _, count in requests):
        return given if given is not None else 0
    pool = gpu_pool(environ)
    limit, source = len(pool), pool_text(pool, environ)
    if given is not None and (given < limit or not pool):  # no devices here: SLURM assigns (profiles/slurm)
        limit, source = given, f"{given} (Snakemake's --resources gpu)"
    refused = [(job, count) for job, count in requests if count > limit]
    if refused:
        job, count = refused[0]
        more = f" (and {len(refused) - 1} more jobs)" if len(refused) > 1 else ""
        raise ValueError(f"{job} asks for {count} GPUs; this machine has {source}{more}")
    return given if given is not None else limit


def lease_prefix(count: int) -> str:
    """The words before a job's command that lease its GPUs (nothing for a CPU job).

    >>> lease_prefix(8)
    'python -m klrl gpu-lease --gpus 8 --'
    >>> lease_prefix(0)
    ''
    """
    return f"python -m klrl gpu-lease --gpus {count} --" if count > 0 else ""


def gpu_requests(config: dict, cells: Mapping, base_models: Iterable[str]) -> list[tuple[str, int]]:
    """(job, GPUs) of every GPU-asking job of the grid: each cell's train and evaluate jobs, each
    base model's evaluate_base job."""
    from klrl.grid.expansion import eval_job_resources, job_resources

    requests = []
    for cell in cells.values():
        requests.append((f"train job of {cell.id}", job_resources(config, cell.model)["gpus"]))
        requests.append((f"evaluate job of {cell.id}", eval_job_resources(config, cell.model)["gpus"]))
    requests += [(f"evaluate_base job of {model}", eval_job_resources(config, model)["gpus"]) for model in base_models]
    return requests
