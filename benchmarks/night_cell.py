"""One cell of config/night.yaml for a few steps on one GPU: its measured step time beside the
one `klrl budget` assumes, so the first lent GPU measures the night's budget.

The cell is K3 in the loss at β 0.3 on-policy (the night's on-policy recipe: 64 prompts × 5
samples, 1,024 new tokens, a colocated vLLM engine), trained for `--steps` steps from the Hub
cache (offline: `python -m klrl fetch --config config/night.yaml --datasets hub-datasets` first,
then KLRL_HUB_DATASETS=hub-datasets). It prints one line:
    night_cell: PASS — step time (median of steps after the first) S s, the budget assumes B s
or SKIP when the model or MATH is not on this machine, FAIL with the log's end when training
fails. Run by benchmarks/gpu_check.sh after the GPU check.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

CELL = "qwen2.5-0.5b-instruct__k3-loss__b0.3__on__s0"


def assumed_seconds(config: dict, cell) -> float:
    """The budget's seconds a step of the cell (klrl.grid.run_budget)."""
    from klrl.grid.run_budget import COMPLETION_TOKENS, PEAK_FLOPS, PROMPT_TOKENS, UTILISATION
    from klrl.grid.run_budget import rollout_seconds, step_flops
    from klrl.models import get_base_model
    from klrl.models.hub_sizes import hub_size

    params = hub_size(get_base_model(cell.model, config.get("models")).hub_id).params
    train = cell.train
    tokens = PROMPT_TOKENS + min(COMPLETION_TOKENS, train["max_new_tokens"])
    flops = step_flops(params, train["prompts_per_step"] * train["group_size"], tokens, off_policy=False)
    return flops / (PEAK_FLOPS * UTILISATION) + rollout_seconds(train["max_new_tokens"])


def main(argv: list[str] | None = None) -> int:
    from klrl.grid.config_check import read_config
    from klrl.grid.expansion import expand_grid
    from klrl.tasks.data import prepare

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--out", type=Path, default=Path("results/gpu_check/night"))
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps must be at least 2: the first step warms kernels up and is not timed")
    config = read_config(Path("config/night.yaml"))
    cell = expand_grid(config)[CELL]
    data = args.out / "data" / "math"
    try:
        if not (data / "manifest.json").exists():
            prepare("math", data, seed=0, sizes={"train": 512, "test": 16}, source="hub")
    except Exception as error:  # offline without the data set's copy: named, not a failure of the check
        print(f"night_cell: SKIP — MATH not on this machine ({error}); `klrl fetch` it first")
        return 0
    settings = cell.train | {
        "steps": args.steps,
        "train_data": str(data / "train.jsonl"),
        "eval_data": str(data / "test.jsonl"),
        "checkpoint_every": 0,
        "eval_every": 0,
    }
    run = args.out / "run"
    run.mkdir(parents=True, exist_ok=True)
    (run / "cell.json").write_text(json.dumps(settings))
    command = [sys.executable, "-m", "klrl", "train", "--config", str(run / "cell.json"), "--out", str(run / "train")]
    with (run / "train.log").open("w") as log:
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT).returncode
    lines = (run / "train.log").read_text(errors="replace").splitlines()
    if code != 0:
        missing = any("LocalEntryNotFoundError" in line or "offline" in line.lower() for line in lines)
        state = "SKIP" if missing else "FAIL"
        print(f"night_cell: {state} — the end of {run / 'train.log'}: " + " | ".join(lines[-3:]))
        return 0 if missing else 1
    records = [json.loads(line) for line in (run / "train" / "metrics.jsonl").read_text().splitlines()]
    seconds = [sum(v for k, v in r.items() if k.startswith("time/")) for r in records if "loss/total" in r][1:]
    print(
        f"night_cell: PASS — {CELL}, {args.steps} steps: step time (median of steps after the first)"
        f" {statistics.median(seconds):.1f} s, the budget assumes {assumed_seconds(config, cell):.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
