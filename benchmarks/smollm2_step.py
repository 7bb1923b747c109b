"""SmolLM2-135M's RL step at a config's shape: this checkout's levers against a baseline revision,
interleaved, with where the time goes and the matrix-product floor.

The cell is the first of `--config`'s grid (its train settings: prompts, group size, new
tokens, shots), on the SmolLM2 base and the task data that Snakemake builds for that config
(built here if missing). Each repetition runs every variant once, in order, each in its own
process with one thread, timing `--steps` training steps after `--warmup` discarded ones:
    <revision>       each baseline revision's code, float32 (settings it does not know dropped)
    float32          this checkout, float32, AdamW's foreach kernel
    fused AdamW      this checkout, float32, AdamW's fused kernel
    bf16 (FSDP)      this checkout, FSDP's bfloat16 compute over float32 master weights
    bf16-autocast    this checkout, autocast's bfloat16 matrix products, fused AdamW
Rollouts differ between precisions after the first update, so each row also gives the mean
completion length its steps had. The phases are the trainer's own timers (time/generate,
time/score, time/backward, time/optimizer).

The floor: the step's matrix-product FLOPs (generation's prefill and decoding, the scoring
forwards of πθ and πref, the backward at twice the policy's forward), from the model's shape
and the token counts the steps had, divided by this CPU's measured one-thread matmul rate in
the variant's dtype at the scoring's main shape. Decoding is bound by reading the weights
rather than by arithmetic, so no variant can reach it; the fraction says how far each is.

With `--side-by-side` it times the two ways of using two cores for a grid, in this checkout's
bf16-autocast: one job of two threads, or two jobs of one thread at once (what `jobs.threads: 1`
and `--cores 2` do).

    .venv/bin/python benchmarks/smollm2_step.py [--baseline e156f09 ...] [--side-by-side] [--config config/smollm2.yaml] [--reps 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PHASES = ("generate", "score", "backward", "optimizer")
TARGET = 2.0  # the target: the step at least 2× faster than the baseline
FLOAT32 = {"mixed_precision": "none", "fused_adamw": None}  # a baseline's settings (None: dropped)
VARIANTS = {  # name: (code, settings over the cell's, matmul dtype); the baselines come first
    "float32": ("this", {"mixed_precision": "none", "fused_adamw": False}, "float32"),
    "fused AdamW": ("this", {"mixed_precision": "none", "fused_adamw": True}, "float32"),
    "bf16 (FSDP)": ("this", {"mixed_precision": "bf16", "fused_adamw": False}, "bfloat16"),
    "bf16-autocast": ("this", {"mixed_precision": "bf16-autocast", "fused_adamw": True}, "bfloat16"),
}


def measure(settings_path: Path, out: Path, warmup: int, steps: int) -> None:
    """One process: train `warmup + steps` steps of the cell; print one JSON line per timed step."""
    import dataclasses

    from klrl.training.config import TrainConfig, load_config
    from klrl.training.trainer import Trainer

    fields = {field.name for field in dataclasses.fields(TrainConfig)}
    settings = {key: value for key, value in json.loads(settings_path.read_text()).items() if key in fields}
    settings = {key: value for key, value in settings.items() if value is not None}
    (out / "settings.json").write_text(json.dumps(settings))
    trainer = Trainer(load_config(out / "settings.json"), out / "train")
    seen = {}
    sample = trainer.actor.sample

    def counted(step, version):
        batch = sample(step, version)
        rollout = batch.rollout
        firsts = rollout.prompt_mask[:: trainer.config.group_size]  # a group's rows share its prompt
        seen["prompts"] = firsts.shape[0]
        seen["prompt_tokens"] = int(firsts.sum())
        seen["completion_tokens"] = int(rollout.completion_mask.sum())
        seen["rows"] = rollout.completion_mask.shape[0]
        return batch

    trainer.actor.sample = counted
    for index in range(warmup + steps):
        start = time.perf_counter()
        record = trainer.train_step()
        total = time.perf_counter() - start
        trainer.step += 1
        if index >= warmup:
            phases = {phase: record[f"time/{phase}"] for phase in PHASES}
            print(json.dumps(phases | {"total": total} | seen), flush=True)


def run(code: Path, settings: dict, work: Path, args, jobs: int = 1) -> list[dict]:
    """One measurement of `settings` with the code at `code`: `jobs` processes at once, each
    with the settings' threads; the steps of all of them."""
    outs, processes = [], []
    for _ in range(jobs):
        out = Path(tempfile.mkdtemp(dir=work))
        path = out / "cell.json"
        path.write_text(json.dumps(settings))
        command = [sys.executable, __file__, "--measure", str(path), str(out), str(args.warmup), str(args.steps)]
        env = os.environ | {"PYTHONPATH": str(code / "workflow"), "OMP_NUM_THREADS": str(settings["threads"])}
        outs.append(out)
        processes.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    steps = []
    for out, process in zip(outs, processes):
        stdout, stderr = process.communicate(timeout=3600)
        subprocess.run(["rm", "-rf", str(out)], check=True)
        if process.returncode:
            raise SystemExit(f"{code}: {settings.get('mixed_precision')}: failed\n{stderr[-2000:]}")
        steps += [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return steps


def matmul_rate(dtype_name: str, shape: tuple[int, int, int]) -> float:
    """FLOP/s of one thread's (M×K)·(K×N) product in `dtype_name`, the median of 20."""
    import torch

    torch.set_num_threads(1)
    dtype = getattr(torch, dtype_name)
    m, k, n = shape
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(20):
        start = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - start)
    return 2 * m * k * n / sorted(times)[len(times) // 2]


def step_flops(model: dict, counts: dict) -> float:
    """Matrix-product FLOPs of one step (see the module's docstring), from the model's config.json
    and one step's token counts: U distinct prompts of P tokens in all, B rows of C completion
    tokens in all."""
    hidden, layers, vocab = model["hidden_size"], model["num_hidden_layers"], model["vocab_size"]
    kv = hidden // model["num_attention_heads"] * model["num_key_value_heads"]
    linear = 2 * layers * (2 * hidden * hidden + 2 * hidden * kv + 3 * hidden * model["intermediate_size"])
    head = 2 * hidden * vocab
    prompt, completion, rows = counts["prompt_tokens"], counts["completion_tokens"], counts["rows"]
    width = prompt / counts["prompts"] + completion / rows  # mean context length
    attention = 4 * layers * hidden * width / 2  # QKᵀ and AV per token, causal: half the context on average
    generation = (prompt + completion) * (linear + attention) + (counts["prompts"] + completion) * head
    forward = (prompt + completion) * (linear + attention) + completion * head
    return generation + 2 * forward + 2 * forward  # πθ and πref forwards, then the backward


def first_cell(config: Path):
    """The config's first cell (klrl.grid.expansion.Cell), its base model and the data of its
    training and evaluation tasks built by Snakemake."""
    sys.path.insert(0, str(ROOT / "workflow"))
    from klrl.grid.config_check import read_config
    from klrl.grid.expansion import expand_grid

    cell = next(iter(expand_grid(read_config(config)).values()))
    data = Path(cell.train["train_data"]).parent.parent
    tasks = {cell.task, *cell.eval_tasks}
    targets = [cell.train["base_model"] + "/config.json", *(str(data / task / "manifest.json") for task in tasks)]
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    command = ["snakemake", "--configfile", str(config), "--cores", "2", *targets]
    subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True)
    return cell


def prepare(config: Path) -> dict:
    """The train settings of the config's first cell, its files built (first_cell), for timing steps."""
    cell = first_cell(config)
    return (
        cell.train
        | {key: str(ROOT / cell.train[key]) for key in ("base_model", "train_data", "eval_data")}
        | {"checkpoint_every": 0, "eval_every": 0, "threads": 1}
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline", nargs="+", help="git revisions to compare the variants with; the first is the speed-up's base"
    )
    parser.add_argument("--config", type=Path, default=ROOT / "config/smollm2.yaml")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--side-by-side", action="store_true", help="time 1 job × 2 threads against 2 jobs × 1 thread")
    parser.add_argument("--measure", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        settings, out, warmup, steps = args.measure
        measure(Path(settings), Path(out), int(warmup), int(steps))
        return
    if not (args.baseline or args.side_by_side):
        parser.error("give --baseline, --side-by-side or both")
    from common import (
        export_revision,
        machine,
        median,
        verdict,
    )  # not in --measure: a baseline's klrl may lack what common imports

    print(machine())
    cell = prepare(args.config.resolve())
    model = json.loads((Path(cell["base_model"]) / "config.json").read_text())
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        if args.baseline:
            code = {rev: export_revision(rev, work / rev) for rev in args.baseline} | {"this": ROOT}
            variants = {rev: (rev, FLOAT32, "float32") for rev in args.baseline} | VARIANTS
            steps: dict[str, list[dict]] = {name: [] for name in variants}
            for rep in range(args.reps):
                for name, (which, settings, _) in variants.items():
                    measured = run(code[which], cell | settings, work, args)
                    steps[name] += measured
                    print(rep, name, [round(step["total"], 2) for step in measured], flush=True)
            print(variants_table(steps, variants, args.baseline[0], model))
            fast, base = (median(step["total"] for step in steps[name]) for name in ("bf16-autocast", args.baseline[0]))
            verdict(f"SmolLM2 RL step ≥ 2× {args.baseline[0]}", f"{base / fast:.2f}×", base / fast >= TARGET)
        if args.side_by_side:
            print(side_by_side_table(cell | VARIANTS["bf16-autocast"][1], work, args))


def variants_table(steps: dict, variants: dict, base_name: str, model: dict) -> str:
    """The token counts, the floor and one row per variant: medians over its timed steps."""
    from common import markdown_table, median

    counts = {
        key: median(step[key] for step in steps["float32"])
        for key in ("prompts", "prompt_tokens", "completion_tokens", "rows")
    }
    flops = step_flops(model, counts)
    shape = (
        int(counts["prompt_tokens"] + counts["completion_tokens"]),
        model["hidden_size"],
        model["intermediate_size"],
    )
    rates = {dtype: matmul_rate(dtype, shape) for dtype in ("float32", "bfloat16")}
    print(
        f"{counts['rows']} rows; median per step: {counts['prompts']} distinct prompts of {counts['prompt_tokens']} "
        f"tokens in all, {counts['completion_tokens']} completion tokens; {flops / 1e9:.0f} GFLOP of matrix products"
    )
    print(
        f"one-thread matmul at {'×'.join(map(str, shape))}: "
        + ", ".join(f"{dtype} {rate / 1e9:.0f} GFLOP/s" for dtype, rate in rates.items())
    )
    base = median(step["total"] for step in steps[base_name])
    rows = []
    for name, (_, _, dtype) in variants.items():
        total = median(step["total"] for step in steps[name])
        floor = flops / rates[dtype]
        phases = [median(step[phase] for step in steps[name]) for phase in PHASES]
        length = sum(step["completion_tokens"] / step["rows"] for step in steps[name]) / len(steps[name])
        rows.append([name, total, *phases, length, base / total, floor, floor / total])
    header = ["variant", "step (s)", *[f"{phase} (s)" for phase in PHASES], "completion tokens"]
    return markdown_table(header + ["speed-up", "floor (s)", "of floor"], rows)


def side_by_side_table(settings: dict, work: Path, args) -> str:
    """Two cores: one job of two threads against two jobs of one thread at once, interleaved;
    a grid's throughput is jobs × steps per minute."""
    from common import markdown_table, median

    layouts = {"1 job × 2 threads": (2, 1), "2 jobs × 1 thread": (1, 2)}
    steps: dict[str, list[dict]] = {name: [] for name in layouts}
    for rep in range(args.reps):
        for name, (threads, jobs) in layouts.items():
            measured = run(ROOT, settings | {"threads": threads}, work, args, jobs)
            steps[name] += measured
            print(rep, name, [round(step["total"], 2) for step in measured], flush=True)
    rows = []
    for name, (_, jobs) in layouts.items():
        total = median(step["total"] for step in steps[name])
        rows.append([name, total, jobs * 60 / total])
    return markdown_table(["layout (bf16-autocast)", "step (s)", "cell-steps per minute"], rows)


if __name__ == "__main__":
    main()
