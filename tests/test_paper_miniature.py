"""The paper's grid (config/paper.yaml) in miniature on CPUs (config/overlays/cpu-mini.yaml),
end to end through Snakemake: the suite's longest test, alone in its file so that `make test`'s
two workers (pytest-xdist, one file per worker at a time) run it beside the rest and it starts
first (marker `longest`, tests/conftest.py)."""

import dataclasses

import pandas as pd
import pytest
import yaml
from klrl.grid.expansion import expand_grid
from test_overlays import CODE_PATHS
from workflow_helpers import FIGURES, copy_workflow, job_counts, load_config, snakemake, train_commands


@pytest.mark.longest
@pytest.mark.slow
def test_the_paper_grid_in_miniature_runs_end_to_end(tmp_path):
    """config/paper.yaml with config/overlays/cpu-mini.yaml: every group of the paper's grid through
    every rule of the workflow, torchrun with 2 CPU processes, bf16 over fp32 master weights,
    micro-batches, the MATH/MMLU loaders on their fixtures, Countdown, lm-eval, the tables and the
    figures (tests/test_overlays.py names each code path its cells take, one β per KL configuration
    and policy mode)."""
    folder = copy_workflow(tmp_path)
    configs = ("--configfile", "config/paper.yaml", "config/overlays/cpu-mini.yaml")
    dry = snakemake(folder, "-n", "-p", *configs)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert set(train_commands(dry.stdout)) == {"torchrun --standalone --nproc_per_node 2 -m klrl"}
    cells = expand_grid(load_config("paper", overlay="cpu-mini"))
    assert {cell.group for cell in cells.values()} == {group["name"] for group in load_config("paper")["groups"]}
    per_cell = {"cell_settings": len(cells), "train": len(cells), "evaluate": len(cells)}
    once = {"plan": 1, "track_grid": 1, "toy_bias": 1, "aggregate": 1, "track_figures": 1, "all": 1}
    # two bases built (tiny, SmolLM2 cut to 2 layers) and evaluated, five tasks' data, every figure
    jobs = per_cell | once | {"build_base": 2, "evaluate_base": 2, "prepare_data": 5, "figure": len(FIGURES)}
    assert job_counts(dry.stdout) == jobs | {"total": sum(jobs.values())}
    result = snakemake(folder, "--cores", "2", "--keep-going", *configs, timeout=3600)
    assert result.returncode == 0, result.stderr[-5000:]
    out = folder / "results" / "paper-cpu-mini"
    scores = pd.read_csv(out / "tables" / "scores.csv")
    assert set(scores["cell"]) == set(cells)
    assert set(scores["status"]) == {"completed"}
    ran = {}  # each cell with the settings its train job ran with
    for cell in cells.values():
        saved = yaml.safe_load((out / "cells" / cell.id / "train" / "config.yaml").read_text())
        assert (saved["mixed_precision"], saved["micro_batch_size"], saved["device"]) == ("bf16", 1, "cpu")
        log = (out / "logs" / "train" / f"{cell.id}.log").read_text()
        assert "2 processes" in log, log[-2000:]
        ran[cell.id] = dataclasses.replace(cell, train=saved)
    mini = load_config("paper", overlay="cpu-mini")
    assert [name for name, taken in CODE_PATHS.items() if not taken(mini, ran)] == []
    tasks = set(scores["task"])
    assert {"math", "mmlu-college-physics", "mmlu-college-chemistry", "mmlu-college-biology", "countdown"} <= tasks
    assert sorted(path.stem for path in (out / "figures").glob("*.png")) == FIGURES
