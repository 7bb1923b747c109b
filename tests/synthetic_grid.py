"""A synthetic results folder for the default grid (config/config.yaml), for drawing every figure.

Every cell of the default grid gets a plausible curve and evaluation (with its KL measurement),
written in the files `klrl aggregate` reads, with the cases a figure must show: a configuration whose every seed
diverged (K3 in reward on-policy, no KL off-policy), one seed of a configuration diverged (K1 in
loss at the largest β), a configuration with no results at all (K2 in loss at the largest β),
NaN values in a curve, and a toy table whose unbiased rows have a bias of exactly 0. The analysis
plan is recorded before any cell's files (klrl.analysis.preregistration); seed 0's cells trained at commit
`aaaa111` on 2026-12-01, the others at `bbbb222` on 2026-12-02 (klrl.core.provenance).

    python tests/synthetic_grid.py OUT    # writes OUT/results/... and OUT/results/tables/
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from klrl.analysis.tables import aggregate
from klrl.grid.expansion import expand_grid, settings_json
from klrl.core.paths import Layout
from klrl.analysis.preregistration import record_plan

ROOT = Path(__file__).resolve().parents[1]
STEPS = [0, 10, 20, 30, 40]
PROBLEMS = 12
# final in-domain accuracy each configuration climbs towards (its out-of-domain score is lower)
CEILING = {
    "none": 0.55,
    "k1-reward": 0.75,
    "k1-loss": 0.5,
    "k2-loss": 0.6,
    "k3-reward": 0.2,
    "k3-loss": 0.65,
    "k1-both": 0.72,
    "k3-both": 0.74,
    "k1-reward-prefixis": 0.7,
}
ALL_DIVERGED = {("k3-reward", "on"), ("none", "off")}
UNBIASED = {
    "k1-reward": ("on",),
    "k1-both": ("on",),
    "k3-both": ("on",),
    "k1-reward-seqis": ("on", "off"),
    "k1-reward-prefixis": ("on", "off"),
}


def _curve(kl: str, beta: float, seed: int, rng: np.random.Generator) -> list[float]:
    top = CEILING.get(kl, 0.5) - (0.1 * beta if kl != "k1-reward" else 0.0)
    return [float(np.clip(0.3 + (top - 0.3) * (1 - np.exp(-step / 15)) + rng.normal(0, 0.03), 0, 1)) for step in STEPS]


def _mechanism(kl: str, beta: float, task: str, curve: list[float], rng: np.random.Generator) -> dict:
    """A plausible KL measurement (klrl.evaluation.mechanism): the reverse KL shrinks as β grows
    where the penalty restrains it (K1 in the reward, the "both" placements), much less elsewhere."""
    restrained = kl in ("k1-reward", "k1-both", "k3-both", "k1-reward-prefixis")
    reverse = (1.5 if kl == "none" else 1.2 / (1 + (20 if restrained else 2) * beta)) + abs(rng.normal(0, 0.05))
    reward = curve[-1]
    values = {"kl_reverse": reverse, "kl_forward": 1.3 * reverse, "entropy": 4.0 - reverse, "reward": reward}
    summary = {"task": task, "prompts": 64, "samples": 4, "beta": beta}
    for name, value in values.items():
        summary |= {name: float(value), f"{name}_se": 0.05 * float(value)}
    return summary | {"objective": reward - beta * reverse, "objective_se": 0.03, "seconds": 4.0}


def _write_eval(
    folder: Path, scores: dict[str, float], rng: np.random.Generator, status: dict | None, mechanism: dict | None = None
) -> None:
    (folder / "samples").mkdir(parents=True)
    tasks = {}
    for task, mean in scores.items():
        values = np.clip(rng.normal(mean, 0.15, PROBLEMS), 0, 1).round(2)
        lines = [json.dumps({"id": f"{task}-test-{i:05d}", "pass@1": float(v)}) for i, v in enumerate(values)]
        (folder / "samples" / f"{task}.jsonl").write_text("\n".join(lines) + "\n")
        tasks[task] = {"pass@1": float(values.mean()), "stderr": 0.05, "problems": PROBLEMS, "samples": 4}
    extra = {"mechanism": mechanism} if mechanism else {}
    (folder / "results.json").write_text(json.dumps({"tasks": tasks, "train_status": status} | extra))


def write_grid(out: Path) -> Path:
    """Writes the synthetic results under out/results and their tables under out/results/tables;
    returns the tables folder."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cells = expand_grid(config)
    root = out / "results"
    record_plan(config, Layout(root))
    largest = max(cell.beta for cell in cells.values())
    for cell in cells.values():
        settings = Layout(root).settings(cell.id)
        settings.parent.mkdir(parents=True)
        settings.write_text(settings_json(cell))  # as the workflow writes it before training
        if cell.kl == "k2-loss" and cell.beta == largest:
            continue  # a configuration with no results at all
        rng = np.random.default_rng([cell.seed, len(cell.kl), int(cell.beta * 10)])
        curve = _curve(cell.kl, cell.beta, cell.seed, rng)
        diverged = (cell.kl, cell.policy) in ALL_DIVERGED or (
            cell.kl == "k1-loss" and cell.beta == largest and cell.seed == 1
        )
        if diverged:
            curve = [curve[0], curve[1] * 0.4, 0.02]
        train = settings.parent
        status = {
            "status": "diverged" if diverged else "completed",
            "step": STEPS[len(curve) - 1],
            "reason": "",
            "commit": "aaaa111" if cell.seed == 0 else "bbbb222",
            "finished": f"2026-12-0{1 + (cell.seed > 0)}T10:00:00+00:00",
        }
        (train / "status.json").write_text(json.dumps(status))
        (train / "config.yaml").write_text(yaml.safe_dump(cell.train))  # the resolved config the trainer writes
        records = []
        for step, value in zip(STEPS, curve):
            entropy = 1.2 - 0.02 * step * (1.5 if cell.kl == "none" else 1.0) + rng.normal(0, 0.03)
            forward = 0.01 * step * (0.5 if cell.kl in ("k3-loss", "k1-reward") else 1.0) + abs(rng.normal(0, 0.02))
            reverse = 0.012 * step * (0.4 if cell.kl == "k1-reward" else 1.0) + abs(rng.normal(0, 0.02))
            records.append(
                {
                    "step": step,
                    "periodic_eval/pass@1": float("nan")
                    if (step == 20 and cell.kl == "k3-loss" and cell.seed == 0)
                    else value,
                    "rollout/accuracy": min(1.0, value + 0.1),
                    "exact/entropy_token": entropy,
                    "exact/forward_kl_policy_prefixes_seq": forward,
                    "exact/reverse_kl_seq": reverse,
                }
            )
        (train / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        if not diverged:
            scores = {task: curve[-1] * (1.0 if task == cell.task else 0.7) for task in cell.eval_tasks}
            mechanism = _mechanism(cell.kl, cell.beta, cell.task, curve, rng)
            _write_eval(root / "cells" / cell.id / "eval", scores, rng, status, mechanism)
    for model in {cell.model for cell in cells.values()}:
        tasks = dict.fromkeys(task for cell in cells.values() for task in cell.eval_tasks)
        _write_eval(root / "base" / model / "eval", {task: 0.3 for task in tasks}, np.random.default_rng(0), None)
    (root / "toy").mkdir(parents=True)
    names = dict.fromkeys(cell.kl for cell in cells.values()) | dict.fromkeys(UNBIASED)
    rows = [
        {
            "config": name,
            "mode": mode,
            "rel_bias": 0.0 if mode in UNBIASED.get(name, ()) else (1.0 if name == "none" else 0.4 + 0.1 * i),
            "rel_std": 0.0 if name == "none" else 0.5 + 0.05 * i,
        }
        for i, name in enumerate(names)
        for mode in ("on", "off")
    ]
    pd.DataFrame(rows).to_csv(root / "toy" / "bias.csv", index=False)
    aggregate(list(cells), root / "tables", root=root)
    return root / "tables"


if __name__ == "__main__":
    print(write_grid(Path(sys.argv[1])))
