"""The night (config/night.yaml) in miniature on CPUs (config/overlays/night-mini.yaml): its whole
grid through a Snakemake dry run, and the one cell the paper's miniature has no equivalent of run
end to end: a chat model on MATH in one process (the night's one-GPU cells: no torchrun), trained,
evaluated on MATH and the MMLU subsets with its KL measured, after the plan with the claims it
declares not testable is recorded. The paths it shares with the paper's miniature
(tests/test_paper_miniature.py: the MATH and MMLU loaders, lm-eval, the tables, the figures) run
there, not twice; the analysis of two β and several seeds is held by tests/analysis."""

import json

import pytest
import yaml
from klrl.grid.expansion import expand_grid
from workflow_helpers import copy_workflow, job_counts, load_config, snakemake, train_commands

CONFIGS = ("--configfile", "config/night.yaml", "config/overlays/night-mini.yaml")
CELL = "smollm2-135m__k1-loss__b0.3__on__s0"


@pytest.mark.slow
def test_the_night_in_miniature(tmp_path):
    folder = copy_workflow(tmp_path)
    dry = snakemake(folder, "-n", "-p", *CONFIGS)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert set(train_commands(dry.stdout)) == {"python -m klrl"}  # one process a cell
    night, mini = load_config("night"), load_config("night", overlay="night-mini")
    cells = expand_grid(mini)
    assert len(cells) == len(expand_grid(night)) == 75  # the stand-in keeps every cell of the night
    assert {cell.group for cell in cells.values()} == {group["name"] for group in night["groups"]}
    assert {(cell.kl, cell.beta, cell.policy) for cell in cells.values() if cell.kl == "k1-loss"} == {
        ("k1-loss", 0.05, "on"),
        ("k1-loss", 0.3, "on"),
        ("k1-loss", 0.005, "off"),
    }
    per_cell = {"cell_settings": 75, "train": 75, "evaluate": 75}
    once = {"plan": 1, "track_grid": 1, "toy_bias": 1, "aggregate": 1, "track_figures": 1, "all": 1}
    jobs = per_cell | once | {"build_base": 1, "evaluate_base": 1, "prepare_data": 4}
    counts = job_counts(dry.stdout)
    assert {k: v for k, v in counts.items() if k not in ("figure", "total")} == jobs

    out = folder / "results" / "night-cpu-mini"
    targets = [f"results/night-cpu-mini/cells/{CELL}/eval/results.json", "results/night-cpu-mini/plan.json"]
    result = snakemake(folder, "--cores", "2", *CONFIGS, "--", *targets, timeout=900)
    assert result.returncode == 0, result.stderr[-5000:]
    plan = json.loads((out / "plan.json").read_text())["plan"]
    assert plan["not_testable"] == night["not_testable"]  # recorded before the cell trained
    saved = yaml.safe_load((out / "cells" / CELL / "train" / "config.yaml").read_text())
    assert (saved["task"], saved["kl"]["beta"], saved["device"]) == ("math", 0.3, "cpu")
    assert "completed (1 processes" in (out / "logs" / "train" / f"{CELL}.log").read_text()
    evaluated = json.loads((out / "cells" / CELL / "eval" / "results.json").read_text())
    assert list(evaluated["tasks"]) == [
        "math",
        "mmlu-college-physics",
        "mmlu-college-chemistry",
        "mmlu-college-biology",
    ]
    assert evaluated["mechanism"]["kl_reverse"] >= 0
