"""The GPU check's lease stage (benchmarks/gpu_check.py): two one-GPU jobs started at once
through `klrl gpu-lease --gpus 1` (klrl.grid.gpu_leases), as the workflow starts evaluation jobs
on one machine, must see different devices: different CUDA_VISIBLE_DEVICES and, on CUDA,
different physical GPUs (their UUIDs). It needs a pool of two devices or more."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from klrl.grid.gpu_leases import gpu_pool
from klrl.grid.lease_locks import LOCKS_ENV

# A job: what it sees, held long enough for the other job to start beside it.
_JOB = """
import json, os, sys, time
seen = {"visible": os.environ.get("CUDA_VISIBLE_DEVICES")}
if sys.argv[1] == "cuda":
    import torch
    seen["uuid"] = str(torch.cuda.get_device_properties(0).uuid)
time.sleep(3)
print(json.dumps(seen))
"""


def lease_check(device: str) -> tuple[bool | None, str]:
    """(passed, detail); passed is None when the pool has fewer than two devices (not run)."""
    pool = gpu_pool()
    if len(pool) < 2:
        return None, f"needs 2 or more GPUs; the pool has {len(pool)}"
    with tempfile.TemporaryDirectory() as locks:
        env = os.environ | {LOCKS_ENV: locks}
        command = [sys.executable, "-m", "klrl", "gpu-lease", "--gpus", "1", "--", sys.executable, "-c", _JOB, device]
        jobs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)]
        outputs = [job.communicate(timeout=300)[0] for job in jobs]
    if any(job.returncode for job in jobs):
        return False, f"a leased job failed (exit {[job.returncode for job in jobs]})"
    seen = [json.loads(output.strip().splitlines()[-1]) for output in outputs]
    different = all(seen[0][key] != seen[1][key] for key in seen[0])
    return different, " against ".join(", ".join(f"{key} {value}" for key, value in job.items()) for job in seen)
