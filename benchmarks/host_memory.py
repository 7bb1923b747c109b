"""Peak host memory of each training process while it loads its models and while it writes a
checkpoint, and the checkpoint's bytes on disk, at 1, 2 and 4 processes, for the off-policy
cell and its on-policy twin (interleaved).

The cell is the paper's off-policy setting in miniature: SmolLM2-135M (all 30 layers), bf16
mixed precision (so every process count goes through FSDP), lag 4, its lag at its steady state
and the AdamW moments made, then one checkpoint: one real step at learning rate 0, after which
its queue holds the rollouts of steps 1-4. The on-policy twin (lag 0) makes the same step: its
checkpoint is the one an off-policy checkpoint is compared with. Each process measures itself:
the kernel's high-water mark of its resident memory (VmHWM), reset before each phase
(`/proc/self/clear_refs`, Linux).

    python benchmarks/host_memory.py [--procs 1 2 4]

Each process of a run is one row: its rank, its peak while loading and its peak while
checkpointing, each with the resident memory it had before the phase, and (rank 0) the
checkpoint's bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, arith_data, machine, markdown_table  # noqa: E402

LAG = 4
PHASES = ("before_load", "load_peak", "before_checkpoint", "checkpoint_peak")


def _memory(field: str) -> float:
    """A /proc/self/status field (VmRSS, VmHWM) in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def measure(config_path: Path, out_dir: Path, report: Path) -> None:
    """One process's phases (run under torchrun, or alone): load, fill the queue, checkpoint."""
    from klrl.training.config import load_config
    from klrl.training.trainer import Trainer

    config = load_config(config_path)
    _reset_peak()
    before_load = _memory("VmRSS")
    trainer = Trainer(config, out_dir)
    load_peak = _memory("VmHWM")
    trainer.learner.optimizer.param_groups[0]["lr"] = 0.0
    trainer.train_step()  # the AdamW moments, and the queue holding the rollouts of steps 1 … lag
    trainer.step = 1
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    _reset_peak()
    before_checkpoint = _memory("VmRSS")
    trainer._checkpoint()
    checkpoint_peak = _memory("VmHWM")
    written = Path(out_dir) / "checkpoints" / "step-00000001"
    row = {
        "rank": trainer.procs.rank,
        "before_load": before_load,
        "load_peak": load_peak,
        "before_checkpoint": before_checkpoint,
        "checkpoint_peak": checkpoint_peak,
        "checkpoint_mb": sum(path.stat().st_size for path in written.iterdir()) / 1e6 if trainer.procs.is_main else "",
    }
    with report.open("a") as handle:
        handle.write(json.dumps(row) + "\n")


def run(procs: int, config_path: Path, work: Path) -> list[dict]:
    """One measurement: `procs` processes of this checkout (its workflow/ on PYTHONPATH)."""
    report = work / "report.jsonl"
    report.unlink(missing_ok=True)
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(procs)]
    command = [*launcher, __file__, "--measure", str(config_path), str(work / "train"), str(report)]
    env = os.environ | {"PYTHONPATH": str(ROOT / "workflow"), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    subprocess.run(["rm", "-rf", str(work / "train")], check=True)
    if result.returncode:  # e.g. a process killed for memory: said in the table, and the rest goes on
        print(f"{config_path.name} at {procs} processes failed:\n{result.stderr[-1500:]}", file=sys.stderr)
        killed = "SIGKILL" in result.stderr or "exitcode  : -9" in result.stderr
        return [{"rank": "all", "failed": "killed (-9: out of memory?)" if killed else f"exit {result.returncode}"}]
    return sorted((json.loads(line) for line in report.read_text().splitlines()), key=lambda row: row["rank"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--measure", nargs=3, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(*args.measure)
        return
    print(machine())
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        base = work / "smollm2-135m"
        subprocess.run(
            [sys.executable, "-m", "klrl", "convert-base", "--out", str(base)],
            check=True,
            capture_output=True,
        )
        data = arith_data(work / "data")
        settings = {
            "base_model": str(base),
            "train_data": str(data / "train.jsonl"),
            "eval_data": str(data / "test.jsonl"),
            "reward": "arithmetic",
            "kl": {"name": "k1-reward", "beta": 0.1},
            "mixed_precision": "bf16",
            "prompts_per_step": 4,
            "group_size": 2,
            "steps": 2 * LAG,
            "max_new_tokens": 16,
            "threads": 1,
            "eval_every": 0,
            "eval_size": 4,
        }
        configs = {}
        for lag in (LAG, 0):
            configs[lag] = work / f"cell-lag{lag}.yaml"
            configs[lag].write_text(yaml.safe_dump(settings | {"async_lag": lag}))
        variants = {f"lag {LAG}": configs[LAG], "on-policy": configs[0]}  # interleaved per process count
        rows = []
        for procs in args.procs:
            for name, config_path in variants.items():
                for row in run(procs, config_path, work):
                    keys = (*PHASES, "checkpoint_mb")
                    figures = (
                        [row[key] if row[key] == "" else round(row[key]) for key in keys]
                        if "failed" not in row
                        else [row["failed"]] * len(keys)
                    )
                    rows.append([name, procs, row["rank"], *figures])
                    print(rows[-1], flush=True)
    header = [
        "cell",
        "processes",
        "rank",
        "RSS before load (MB)",
        "peak while loading (MB)",
        "RSS before checkpoint (MB)",
        "peak while checkpointing (MB)",
        "checkpoint on disk (MB)",
    ]
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main()
