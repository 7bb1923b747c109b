"""config/night.yaml's budget (klrl.grid.run_budget): one Qwen2.5-0.5B-Instruct on-policy cell
counted by hand, and the night within 12 hours on one node of 8 GPUs with one-GPU cells
(docs/night.md's block: tests/grid/test_run_budget.py)."""

import pytest
from klrl.grid.run_budget import grid_budget, node_hours
from workflow_helpers import load_config

# Qwen/Qwen2.5-0.5B-Instruct: 494,032,768 parameters (tied embedding, 151,936 × 896)
PARAMS = 494_032_768


def test_an_on_policy_night_cell_counted_by_hand():
    budget = grid_budget(load_config("night"), gpus_per_node=8)
    (row,) = [row for row in budget["rows"] if row.policy == "on"]
    # 12 N FLOPs a token over 64 × 5 samples of 330 + 1,000 tokens at 40% of one H100, plus the
    # rollouts: 120 s at 4,096 new tokens, 1,024 here
    seconds = 12 * PARAMS * 320 * 1_330 / (989e12 * 0.4) + 30
    assert round(seconds, 1) == 36.4
    assert row.gpus == 1 and row.cells == 63  # none once, 4 configurations × 2 β; 7 seeds
    assert row.gpu_hours == pytest.approx(63 * 90 * seconds / 3600, rel=1e-12)
    assert row.footprint.gpu_per_device == 20 * PARAMS + 2 * PARAMS  # unsharded, and the engine's copy


def test_the_night_fits_12_hours_of_one_node_with_8_cells_at_once():
    budget = grid_budget(load_config("night"), gpus_per_node=8)
    assert {row.gpus for row in budget["rows"]} == {1}
    hours = node_hours(budget)
    assert 8 < hours <= 12  # full: fewer seeds would leave the node idle before morning
    assert hours == pytest.approx(
        (budget["gpu_hours"] + sum(r["runtime"] / 60 for _, r in budget["evaluations"])) / 8, rel=1e-12
    )
    # the node's disk at once: 8 running cells' checkpoints; every final model; the download
    assert budget["disk"]["checkpoints"] == 8 * max(row.footprint.running_disk for row in budget["rows"])


def test_the_gpu_checks_night_cell_is_timed_against_the_budgets_step():
    """benchmarks/night_cell.py prints the budget's step time of its cell beside the measured one."""
    from klrl.grid.expansion import expand_grid
    from workflow_helpers import load_benchmark

    night_cell = load_benchmark("night_cell")
    config = load_config("night")
    cell = expand_grid(config)[night_cell.CELL]
    (row,) = [row for row in grid_budget(config, gpus_per_node=8)["rows"] if row.policy == "on"]
    assumed = night_cell.assumed_seconds(config, cell)
    assert (cell.kl, cell.beta, cell.policy) == ("k3-loss", 0.3, "on")
    assert assumed * row.cells * cell.train["steps"] / 3600 == pytest.approx(row.gpu_hours, rel=1e-12)
