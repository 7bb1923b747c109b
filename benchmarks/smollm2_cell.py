"""A whole SmolLM2 cell, training and evaluation, in each generation layout, against a baseline
revision: two cells at once (2 jobs × 1 thread, config/smollm2.yaml's layout), interleaved.

The cell is the first of `--config`'s grid, with its own steps, checkpoints and evaluation
(its eval tasks and the config's evaluation section), run as the grid runs it: `klrl train`,
then `klrl evaluate` on its final model, each a process of one thread, without MLflow. Two
cells of it (seeds 0 and 1) run at once, one per core. The layouts:
    <revision> (hf)  the baseline revision's code: rollouts and evaluation by transformers
    hf               this checkout, the same
    vLLM             this checkout in vLLM's CPU build (`--vllm-python`, .venv-vllm): rollouts
                     from a colocated engine (generation_backend vllm, bfloat16, the policy's
                     weights synced each step, the engine's log-probs kept beside the
                     learner's) and lm-eval's vLLM backend for the evaluation

Per layout, medians over its cells: the wall time of a cell, its training and its evaluation,
the CPU seconds a cell took, and the training's phases summed over its steps (the trainer's own
timers, time/generate, time/score, time/backward, time/optimizer; what the process did besides
them is start-up, checkpoints and the end of the run).

    .venv/bin/python benchmarks/smollm2_cell.py --baseline 09fd533 [--reps 1] [--steps N]
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

from smollm2_step import PHASES, ROOT, first_cell

TARGET = 2.0  # a cell at least 2× cheaper than the baseline's
VLLM = {"generation_backend": "vllm", "vllm_dtype": "bfloat16", "vllm_max_model_len": 512}


def train_fields(python: str, code: Path) -> set[str]:
    """The TrainConfig keys that the code at `code` knows (a baseline may lack newer ones)."""
    program = "import dataclasses, json; from klrl.training.config import TrainConfig; "
    program += "print(json.dumps([field.name for field in dataclasses.fields(TrainConfig)]))"
    env = os.environ | {"PYTHONPATH": str(code / "workflow")}
    return set(json.loads(subprocess.run([python, "-c", program], env=env, capture_output=True, check=True).stdout))


def evaluate_options(config: dict, cell) -> list[str]:
    """`klrl evaluate`'s options for the cell, as workflow/rules/common.smk builds them."""
    from klrl.models import get_base_model

    flags = {"samples": "--samples", "max_new_tokens": "--max-new-tokens", "batch_size": "--batch-size"}
    options = [
        part
        for key, flag in flags.items()
        if key in config["evaluation"]
        for part in (flag, str(config["evaluation"][key]))
    ]
    stops = get_base_model(cell.model, config.get("models")).stop_tokens
    return options + (["--stop-tokens", *stops] if stops else []) + ["--tasks", *cell.eval_tasks]


def one_cell(python: str, code: Path, settings: dict, evaluate: list[str], out: Path) -> subprocess.Popen:
    """`klrl train` then `klrl evaluate` of one cell in `out`, in the background; each prints its wall time."""
    out.mkdir(parents=True)
    (out / "settings.json").write_text(json.dumps(settings))
    klrl = f"{python} -m klrl"
    script = (
        f"s=$(date +%s.%N); {klrl} train --config settings.json --out train > train.log 2>&1 || exit 1; "
        f"t=$(date +%s.%N); {klrl} evaluate --model train/final --device cpu --threads 1 --out eval/results.json "
        + " ".join(f"'{part}'" for part in evaluate)
        + ' > evaluate.log 2>&1 || exit 2; e=$(date +%s.%N); echo "$s $t $e"'
    )
    env = os.environ | {"PYTHONPATH": str(code / "workflow"), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(["bash", "-c", script], cwd=out, env=env, stdout=subprocess.PIPE, text=True)


def run_pair(python: str, code: Path, settings: dict, evaluate: list[str], work: Path) -> list[dict]:
    """Two cells (seeds 0 and 1) at once: per cell its train and evaluate seconds and phases, and
    the pair's CPU seconds per cell (more than its wall time: a job used more than one core)."""
    from klrl.training.record import read_metrics

    from common import children_cpu

    cpu = children_cpu()
    folders = [Path(tempfile.mkdtemp(dir=work)) / "cell" for _ in range(2)]
    processes = [
        one_cell(python, code, settings | {"seed": seed}, evaluate, folder) for seed, folder in enumerate(folders)
    ]
    cells = []
    for folder, process in zip(folders, processes):
        stdout, _ = process.communicate(timeout=7200)
        if process.returncode:
            log = folder / ("train.log" if process.returncode == 1 else "evaluate.log")
            raise SystemExit(f"{code} with {python}: a cell failed:\n{log.read_text()[-3000:]}")
        start, trained, evaluated = map(float, stdout.split())
        steps = [record for record in read_metrics(folder / "train" / "metrics.jsonl") if "time/score" in record]
        phases = {phase: sum(step.get(f"time/{phase}", 0.0) for step in steps) for phase in PHASES}
        cells.append({"train": trained - start, "evaluate": evaluated - trained} | phases)
        subprocess.run(["rm", "-rf", str(folder.parent)], check=True)
    cpu = (children_cpu() - cpu) / len(cells)
    return [one | {"cpu": cpu} for one in cells]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the git revision to compare with")
    parser.add_argument("--config", type=Path, default=ROOT / "config/smollm2.yaml")
    parser.add_argument("--vllm-python", default=str(ROOT / ".venv-vllm/bin/python"), help="vLLM's CPU build's python")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--steps", type=int, help="RL steps per cell (the config's unless given)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "workflow"))
    from common import export_revision, machine, markdown_table, median, verdict

    from klrl.grid.config_check import read_config

    print(machine())
    config = read_config(args.config.resolve())
    cell = first_cell(args.config.resolve())
    settings = cell.train | {key: str(ROOT / cell.train[key]) for key in ("base_model", "train_data", "eval_data")}
    settings |= {"threads": 1} | ({"steps": args.steps} if args.steps else {})
    evaluate = evaluate_options(config, cell) + ["--data-dir", str(ROOT / Path(cell.train["train_data"]).parent.parent)]
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        base = f"{args.baseline} (hf)"
        layouts = {
            base: (sys.executable, export_revision(args.baseline, work / "baseline"), {}, []),
            "hf": (sys.executable, ROOT, {}, []),
            "vLLM": (args.vllm_python, ROOT, VLLM, ["--backend", "vllm"]),
        }
        known = {name: train_fields(python, code) for name, (python, code, _, _) in layouts.items()}
        cells: dict[str, list[dict]] = {name: [] for name in layouts}
        for rep in range(args.reps):
            for name, (python, code, overrides, backend) in layouts.items():
                cell_settings = {key: value for key, value in (settings | overrides).items() if key in known[name]}
                measured = run_pair(python, code, cell_settings, evaluate + backend, work)
                cells[name] += measured
                print(rep, name, [round(one["train"] + one["evaluate"], 1) for one in measured], flush=True)
    base_cell = median(one["train"] + one["evaluate"] for one in cells[base])
    rows = []
    for name, measured in cells.items():
        whole = median(one["train"] + one["evaluate"] for one in measured)
        parts = [median(one[key] for one in measured) for key in ("train", *PHASES, "evaluate", "cpu")]
        rows.append([name, whole, *parts, base_cell / whole])
    header = [
        "layout",
        "cell (s)",
        "train (s)",
        *[f"{phase} (s)" for phase in PHASES],
        "evaluate (s)",
        "CPU (s)",
        "speed-up",
    ]
    print(
        f"{settings['steps']} RL steps a cell, two cells at once, one thread each; medians over {2 * args.reps} cells"
    )
    print(markdown_table(header, rows))
    fast = median(one["train"] + one["evaluate"] for one in cells["vLLM"])
    verdict(f"SmolLM2 cell ≥ 2× {args.baseline}", f"{base_cell / fast:.2f}×", base_cell / fast >= TARGET)


if __name__ == "__main__":
    started = time.time()
    main()
    print(f"{time.time() - started:.0f} s in all")
