"""klrl.analysis.tables: tables and figures from synthetic results: values against hand computation,
missing and diverged cells shown as such, every figure drawn from a partial grid."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from klrl.analysis.tables import CELL_TAGS, aggregate
from klrl.evaluation.results_files import MECHANISM_KEYS
from klrl.grid.expansion import parse_cell_id

from conftest import write_cell_settings
from workflow_helpers import FIGURES, draw_figures

PROBLEMS = [f"arith-test-{i:05d}" for i in range(6)]
# per-problem pass@1 (4 samples each) of each evaluated cell and of the base, on arith and arith-long
K1R_S0 = {"arith": [1.0, 0.75, 0.5, 1.0, 0.25, 1.0], "arith-long": [0.5, 0.5, 0.0, 0.25, 0.0, 0.5]}
K1R_S1 = {"arith": [0.75, 0.75, 0.5, 1.0, 0.5, 0.75], "arith-long": [0.25, 0.5, 0.25, 0.25, 0.0, 0.25]}
BASE = {"arith": [0.5, 0.5, 0.25, 0.75, 0.0, 0.5], "arith-long": [0.25, 0.25, 0.0, 0.0, 0.0, 0.25]}
# the KL measurement of the first cell's evaluation (klrl.evaluation.mechanism); the others have none
MECHANISM = dict(
    zip(
        MECHANISM_KEYS,
        ["arith", 6, 4, 0.1, 0.8, 0.1, 1.5, 0.2, 3.0, 0.3, 0.75, 0.05, 0.67, 0.06, 2.5],
    )
)
CELLS = [
    "tiny__k1-reward__b0.1__on__s0",
    "tiny__k1-reward__b0.1__on__s1",
    "tiny__k3-reward__b0.1__on__s0",
    "tiny__k1-loss__b0.1__on__s0",
]


def _write_eval(folder: Path, per_task: dict, train_status: dict | None, mechanism: dict | None = None) -> None:
    (folder / "samples").mkdir(parents=True)
    tasks = {}
    for task, values in per_task.items():
        lines = [json.dumps({"id": pid, "pass@1": value}) for pid, value in zip(PROBLEMS, values)]
        (folder / "samples" / f"{task}.jsonl").write_text("\n".join(lines) + "\n")
        tasks[task] = {"pass@1": float(np.mean(values)), "stderr": 0.1, "problems": 6, "samples": 4}
    extra = {"mechanism": mechanism} if mechanism else {}
    (folder / "results.json").write_text(json.dumps({"tasks": tasks, "train_status": train_status} | extra))


def _write_cell(
    root: Path, cell: str, status: str, curve: list[float], per_task: dict | None, mechanism: dict | None = None
) -> None:
    tags = parse_cell_id(cell)
    train = write_cell_settings(root, cell, kl=tags["kl"], beta=tags["beta"], seed=tags["seed"]).parent
    (train / "status.json").write_text(json.dumps({"status": status, "step": 10 * (len(curve) - 1), "reason": ""}))
    records = [
        {
            "step": 10 * i,
            "periodic_eval/pass@1": value,
            "rollout/accuracy": value,
            "exact/entropy_token": float("nan") if value < 0.1 else 0.5,
        }
        for i, value in enumerate(curve)
    ]
    (train / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    if per_task is not None:
        _write_eval(root / "cells" / cell / "eval", per_task, {"status": status}, mechanism)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    """Two completed seeds of K1-in-reward, one diverged K3-in-reward cell (not evaluated), one missing cell."""
    root = tmp_path_factory.mktemp("synthetic") / "results"
    _write_cell(root, CELLS[0], "completed", [0.4, 0.6, 0.7, 0.72], K1R_S0, MECHANISM)
    _write_cell(root, CELLS[1], "completed", [0.4, 0.55, 0.65, 0.7], K1R_S1)
    _write_cell(root, CELLS[2], "diverged", [0.4, 0.2, 0.05], None)
    (root / "cells" / CELLS[2] / "eval").mkdir()
    (root / "cells" / CELLS[2] / "eval" / "results.json").write_text(
        json.dumps({"tasks": {}, "skipped": "non-finite weights"})
    )
    write_cell_settings(root, CELLS[3], kl="k1-loss", beta=0.1, seed=0)  # the workflow writes it before training
    _write_eval(root / "base" / "tiny" / "eval", BASE, None)
    (root / "toy").mkdir()
    pd.DataFrame(
        [
            {"config": c, "mode": m, "rel_bias": b, "rel_std": 1.0}
            for c, b in (("k1-reward", 0.0), ("k3-reward", 0.8), ("k1-loss", 1.0))
            for m in ("on", "off")
        ]
    ).to_csv(root / "toy" / "bias.csv", index=False)
    aggregate(CELLS, root / "tables", root=root)
    return root


def test_main_table_values_are_the_hand_computed_ones(synthetic):
    main = pd.read_csv(synthetic / "tables" / "main.csv")
    row = main[(main["kl"] == "k1-reward") & (main["task"] == "arith")].iloc[0]
    mean = (np.mean(K1R_S0["arith"]) + np.mean(K1R_S1["arith"])) / 2
    assert row["pass@1"] == pytest.approx(mean, abs=1e-12)
    assert row["base_pass@1"] == pytest.approx(np.mean(BASE["arith"]), abs=1e-12)
    assert row["delta_vs_base"] == pytest.approx(mean - np.mean(BASE["arith"]), abs=1e-12)
    assert row["ci_lo"] <= row["pass@1"] <= row["ci_hi"] and row["ci_hi"] - row["ci_lo"] > 0
    assert row["delta_ci_lo"] > 0  # every problem improved or held
    assert (row["seeds"], row["cells"], row["status"], row["domain"]) == (2, 2, "2 completed", "in")
    ood = main[(main["kl"] == "k1-reward") & (main["task"] == "arith-long")].iloc[0]
    assert ood["domain"] == "out"
    assert ood["pass@1"] == pytest.approx((np.mean(K1R_S0["arith-long"]) + np.mean(K1R_S1["arith-long"])) / 2)


def test_diverged_and_missing_cells_are_rows_not_gaps(synthetic):
    main = pd.read_csv(synthetic / "tables" / "main.csv")
    diverged = main[main["kl"] == "k3-reward"].iloc[0]
    assert diverged["status"] == "1 diverged" and np.isnan(diverged["pass@1"]) and diverged["seeds"] == 0
    missing = main[main["kl"] == "k1-loss"].iloc[0]
    assert missing["status"] == "1 missing" and np.isnan(missing["pass@1"])
    scores = pd.read_csv(synthetic / "tables" / "scores.csv")
    assert set(scores["cell"]) == set(CELLS)
    table1 = pd.read_csv(synthetic / "tables" / "table1.csv").set_index("kl")
    assert table1.loc["k3-reward", "behaviour"] == "collapsed" and table1.loc["k3-reward", "collapsed"] == 1
    assert table1.loc["k1-reward", "behaviour"] == "stable" and table1.loc["k1-reward", "stable"] == 2
    assert table1.loc["k1-loss", "behaviour"] == "missing"
    assert table1.loc["k3-reward", "toy_rel_bias"] == 0.8
    comparison = pd.read_csv(synthetic / "tables" / "paper_comparison.csv")
    k3r = comparison[(comparison["kl"] == "k3-reward") & (comparison["policy"] == "on")].iloc[0]
    assert "collapsed" in k3r["ours"] and k3r["scale"] == "toy"


def test_curves_keep_non_finite_values_as_nan(synthetic):
    curves = pd.read_csv(synthetic / "tables" / "curves.csv")
    entropy = curves[(curves["cell"] == CELLS[2]) & (curves["metric"] == "entropy")]
    assert entropy["value"].isna().sum() == 1 and len(entropy) == 3


def test_every_table_has_csv_markdown_and_latex(synthetic):
    for name in ("main", "table1", "paper_comparison", "table2"):
        for suffix in ("csv", "md", "tex"):
            assert (synthetic / "tables" / f"{name}.{suffix}").stat().st_size > 0
    table2 = pd.read_csv(synthetic / "tables" / "table2.csv")
    assert {"verl", "openrlhf", "trl", "skyrl"} <= set(table2.columns)
    assert "k1-reward" in set(table2["kl"])


def test_the_mechanism_table_has_a_row_per_measured_cell_with_its_tags(synthetic):
    """Only the first cell's evaluation measured its KL; the diverged, the unmeasured and the
    missing cells have no row."""
    table = pd.read_csv(synthetic / "tables" / "mechanism.csv")
    assert list(table.columns) == ["cell", *CELL_TAGS, *(key for key in MECHANISM_KEYS if key != "beta")]
    (row,) = table.to_dict("records")
    tags = {"model": "tiny", "kl": "k1-reward", "beta": 0.1, "policy": "on", "lag": 0, "seed": 0}
    assert row == {"cell": CELLS[0]} | tags | MECHANISM


@pytest.fixture(scope="module")
def partial_figures(synthetic, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    out = tmp_path_factory.mktemp("figures")
    return out, draw_figures(synthetic / "tables", out)


@pytest.mark.slow
@pytest.mark.parametrize("figure", FIGURES)
def test_every_figure_draws_from_a_partial_grid(partial_figures, figure):
    out, stderr = partial_figures
    assert "Traceback" not in stderr[figure], stderr[figure][-3000:]
    assert (out / f"{figure}.png").stat().st_size > 5000
    assert (out / f"{figure}.pdf").stat().st_size > 1000
