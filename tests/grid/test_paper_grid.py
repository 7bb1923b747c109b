"""config/paper.yaml expands to the paper's grid (docs/paper.md, "Experiments"), cell for cell and
every β of its sweep: `klrl cells` against the cells written out here from the paper's
description, without training (the CPU miniature trains one β of each sweep: tests/test_overlays.py)."""

from klrl.cli import main as klrl
from workflow_helpers import ROOT

ESTIMATORS = ("none", "k1-reward", "k1-loss", "k3-reward", "k3-loss")
# (group, models, KL configurations, β values, policy mode), seed 0: the on-policy β sweep on both
# models, the "both" placements at β 0.1, the off-policy recipe on MATH and on Countdown at
# β 0.005, and this project's prefix-IS extension off-policy.
PAPER_GRID = (
    ("on-policy", ("qwen2.5-7b", "llama3.1-8b-instruct"), ESTIMATORS, (0.05, 0.1, 0.3, 1), "on"),
    ("both", ("qwen2.5-7b",), ("k1-both", "k3-both"), (0.1,), "on"),
    ("off-policy-math", ("qwen2.5-7b",), ESTIMATORS, (0.005,), "off"),
    ("off-policy-countdown", ("qwen3-4b-instruct",), ESTIMATORS, (0.005,), "off"),
    ("off-policy-prefixis", ("qwen2.5-7b",), ("k1-reward-prefixis",), (0.005,), "off"),
)


def _paper_cells() -> list[str]:
    """`klrl cells`'s lines for PAPER_GRID: the kl `none` cell once per model, at β 0."""
    lines = []
    for group, models, kls, betas, policy in PAPER_GRID:
        for model in models:
            for kl in kls:
                for beta in (0,) if kl == "none" else betas:
                    lines.append(f"{model}__{kl}__b{beta:g}__{policy}__s0\t{group}")
    return lines


def test_the_paper_config_makes_the_papers_grid_cell_for_cell(capsys):
    assert klrl(["cells", "--config", str(ROOT / "config" / "paper.yaml")]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed == _paper_cells()
    assert len(listed) == 2 * (1 + 4 * 4) + 2 + 5 + 5 + 1 == 47
