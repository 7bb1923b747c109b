"""`klrl gpu-lease`: run a command holding GPUs of this machine's own (klrl.grid.gpu_leases).

    python -m klrl gpu-lease --gpus 8 -- torchrun --standalone --nproc_per_node 8 -m klrl train ...
    python -m klrl gpu-lease --pool        # how many GPUs the pool has, and which

The workflow's GPU jobs start this way: the command runs with CUDA_VISIBLE_DEVICES set to the
leased ids, and the lease ends when the last process it started has ended (klrl.grid.leased_run),
SIGKILL of the command included. Inside a SLURM allocation the pool is the allocation's devices.
"""

from __future__ import annotations

import argparse
import sys

HELP = "run a command holding N of this machine's GPUs (CUDA_VISIBLE_DEVICES set to them), or print the pool"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gpus", type=int, default=1, help="how many GPUs the command holds")
    parser.add_argument("--pool", action="store_true", help="print the pool's size and ids, and run nothing")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")


def run(args: argparse.Namespace) -> None:
    from klrl.grid.gpu_leases import gpu_pool, pool_text
    from klrl.grid.leased_run import run_leased

    if args.pool:
        pool = gpu_pool()
        print(f"{pool_text(pool)}: {','.join(pool) or 'no GPU'}")
        return
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise ValueError("no command given (after --)")
    if args.gpus < 0:
        raise ValueError(f"--gpus {args.gpus} is negative")
    sys.exit(run_leased(args.gpus, command))
