"""GPU leases on one machine: which devices a GPU job of the grid holds while it runs.

Snakemake's `gpu` resource counts GPUs but names none, so on one machine without SLURM several
jobs would otherwise share GPU 0. Here a job asking for N GPUs takes N devices of the machine's
pool, each by an exclusive `flock` on a file of its own (`gpu-<id>.lock` in LOCKS_ENV's folder),
and runs with CUDA_VISIBLE_DEVICES naming exactly those. The lock belongs to the job's process
(the lease verb execs the job's command with the locked files open), so the operating system
releases it when that process ends, however it ends, SIGKILL included: no registry is left behind.
Under SLURM a job keeps SLURM's own assignment and takes no lease.

The pool is CUDA_VISIBLE_DEVICES where set (the environment Snakemake was started with, which
its jobs inherit), else the devices nvidia-smi lists, else those torch counts. The Snakefile sets
Snakemake's `gpu` resource to the pool's size (`gpu_limit`), so the scheduler never starts more
than the leases can serve, and refuses at load a job that asks for more GPUs than the limit.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

VISIBLE = "CUDA_VISIBLE_DEVICES"
LOCKS_ENV = "KLRL_GPU_LEASES"  # the folder of the lock files (default: <tmp>/klrl-gpu-leases)
SLURM_JOB = "SLURM_JOB_ID"


def gpu_pool(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The machine's GPU ids: CUDA_VISIBLE_DEVICES's list where set (as CUDA reads it: up to the
    first negative id), else 0 .. n-1 for the n devices nvidia-smi lists (or torch counts)."""
    visible = environ.get(VISIBLE)
    if visible is not None:
        ids = []
        for device in (part.strip() for part in visible.split(",")):
            if not device or device.startswith("-"):
                break
            ids.append(device)
        return ids
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
    source = f"{VISIBLE}={environ[VISIBLE]}" if VISIBLE in environ else "the devices of nvidia-smi or torch"
    return f"{len(pool)} ({source})"


def gpu_limit(requests: Iterable[tuple[str, int]], given: int | None, environ: Mapping[str, str] = os.environ) -> int:
    """Snakemake's `gpu` resource for jobs asking `requests` ((job, GPUs) pairs): `given` where the
    command line or profile sets it, else the pool's size. A job asking for more than that is a
    ValueError naming the job and both counts (Snakemake would lower its request silently)."""
    requests = list(requests)
    if given is not None:
        limit, source = given, f"{given} (Snakemake's --resources gpu)"
    elif any(count > 0 for _, count in requests):
        pool = gpu_pool(environ)
        limit, source = len(pool), pool_text(pool, environ)
    else:
        return 0
    refused = [(job, count) for job, count in requests if count > limit]
    if refused:
        job, count = refused[0]
        more = f" (and {len(refused) - 1} more jobs)" if len(refused) > 1 else ""
        raise ValueError(f"{job} asks for {count} GPUs; this machine has {source}{more}")
    return limit


def lock_folder(environ: Mapping[str, str] = os.environ) -> Path:
    return Path(environ.get(LOCKS_ENV) or Path(tempfile.gettempdir()) / "klrl-gpu-leases")


def _lock_file(folder: Path, device: str) -> Path:
    return folder / f"gpu-{re.sub(r'[^A-Za-z0-9_.-]', '_', device)}.lock"


def acquire(
    count: int, pool: list[str], folder: Path, poll: float = 0.5, waiting: Callable[[], None] = lambda: None
) -> dict[str, int]:
    """Exclusive locks on `count` devices of `pool`, all or none, taken under one guard lock (so
    that two jobs never each hold part of what the other needs): {device id: open descriptor}.
    Waits, polling, while fewer are free, calling `waiting` once."""
    if count > len(pool):
        raise ValueError(f"{count} GPUs asked; this machine's pool has {len(pool)} ({','.join(pool) or 'none'})")
    folder.mkdir(parents=True, exist_ok=True)
    guard = os.open(folder / "acquire.lock", os.O_RDWR | os.O_CREAT, 0o666)
    told = False
    try:
        while True:
            fcntl.flock(guard, fcntl.LOCK_EX)
            held = {}
            for device in pool:
                descriptor = os.open(_lock_file(folder, device), os.O_RDWR | os.O_CREAT, 0o666)
                try:
                    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(descriptor)
                    continue
                held[device] = descriptor
                if len(held) == count:
                    return held
            for descriptor in held.values():
                os.close(descriptor)
            fcntl.flock(guard, fcntl.LOCK_UN)
            if not told:
                waiting()
                told = True
            time.sleep(poll)
    finally:
        os.close(guard)


def exec_leased(count: int, command: list[str], environ: Mapping[str, str] = os.environ) -> None:
    """Replace this process by `command` holding `count` GPUs of the pool, with
    CUDA_VISIBLE_DEVICES naming them (in the pool's order). No lease for `count` 0 or under
    SLURM (its own assignment stands)."""
    env = dict(environ)
    if count > 0 and SLURM_JOB not in environ:
        pool = gpu_pool(environ)
        held = acquire(count, pool, lock_folder(environ), waiting=lambda: _say_waiting(count, pool))
        for descriptor in held.values():
            os.set_inheritable(descriptor, True)  # the lock lives as long as the command does
        env[VISIBLE] = ",".join(held)
    os.execvpe(command[0], command, env)


def _say_waiting(count: int, pool: list[str]) -> None:
    print(f"gpu-lease: waiting for {count} of the GPUs {','.join(pool)} to be free", flush=True)


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
