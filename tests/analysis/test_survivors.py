"""Mean rows whose collapsing side kept few survivors, spread wider than the pool, on planted
null and planted effects at the study's shape (27 configurations, 11 seeds, its collapse
probabilities; klrl.analysis.family_simulation): the family holds 5%, a one- or three-survivor row
alone holds 5%, and a planted +0.10 is found inside the family at the power the docs report."""

import numpy as np
import pytest

from klrl.analysis.claim_family import ALPHA
from klrl.analysis.family_simulation import FALSE_AT_NULL, GREATER, Design, decide_grid, simulate_rows, survivor_rate
from klrl.analysis.simulation import Scenario, simulate_grid
from klrl.analysis.verdicts import MIN_SURVIVORS

# The study's shape: its configurations' collapse probabilities, seeds, seed SD and the median pass@1
# of its configurations that did not collapse (the rate without effect)
# (docs/statistics.md's power:collapse block, fitted to its tables).
STUDY = Scenario(base_rate=0.71, seed_sd=0.0558, seeds=11, problems=150)
COLLAPSE = (0, 0.73, 1, 1, 0, 0, 1, 0, 0, 0.73, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.18, 1, 0, 0, 0.36, 0)
WIDER = 2.0  # survivors' seed SD, × the pool's
GRIDS = 400


def _study_family(planted: float = 0.0) -> Design:
    """Every configuration against configuration 0 (stable), survivors at the base rate (no true
    effect); configuration 4 (stable) carries `planted`."""
    effects = [-q * (STUDY.base_rate - STUDY.collapsed_rate) for q in COLLAPSE]
    effects[4] = planted
    rows = tuple((GREATER, (i, 0)) for i in range(1, len(COLLAPSE)))
    return Design(tuple(effects), COLLAPSE, rows, survivor_sd=WIDER)


def _verdicts(design: Design, seed: int) -> tuple[np.ndarray, list[list[dict]]]:
    rows = simulate_rows(STUDY, design, GRIDS, seed)
    return np.array([[row["verdict"] for row in grid] for grid in rows]), rows


@pytest.mark.slow
def test_a_null_family_with_survivors_twice_as_wide_as_the_pool_holds_five_percent():
    verdicts, _ = _verdicts(_study_family(), seed=11)
    assert np.isin(verdicts, FALSE_AT_NULL).any(axis=1).mean() <= ALPHA
    assert "too few survivors" in verdicts  # the 73% configurations keep fewer than 3 survivors in some grids


@pytest.mark.parametrize("survivors", [1, 3])
def test_a_null_row_with_one_or_three_survivors_alone_holds_five_percent(survivors):
    """By the table's rule: at most 5% (one survivor: never decided). The rule before (the
    survivors' variance from the pool) decides the one-survivor row far more often."""
    assert survivor_rate(STUDY, survivors, WIDER, GRIDS, seed=12) <= ALPHA
    if survivors == 1:
        assert survivor_rate(STUDY, 1, WIDER, GRIDS, seed=12, pooled=True) > 3 * ALPHA


def test_a_one_survivor_row_is_too_few_survivors_and_out_of_the_family():
    rng = np.random.default_rng(13)
    grid = simulate_grid(STUDY, [0.0] * 4, rng)
    grid[0][1:] = 0.0  # ten of eleven seeds collapsed
    design = Design((0.0,) * 4, (0.0,) * 4, ((GREATER, (0, 1)), (GREATER, (2, 1))))
    few, other = decide_grid(STUDY, design, grid)
    assert (few["verdict"], few["reason"]) == (
        "too few survivors",
        f"config 0: 1 of 11 seeds did not collapse (fewer than {MIN_SURVIVORS})",
    )
    assert "_test" not in few and other["verdict"] in ("inconclusive", "absent at its size")  # no true difference


@pytest.mark.slow
def test_a_planted_difference_of_010_inside_the_study_family_is_found_and_covered():
    """Its power inside the family (26 one-row claims) is what `klrl power collapse` reports
    in docs/statistics.md; the interval is scored against the true difference, 0.10."""
    verdicts, rows = _verdicts(_study_family(planted=0.10), seed=14)
    planted = verdicts[:, 3]  # configuration 4 against configuration 0
    found = np.char.startswith(planted.astype(str), "reproduced")
    assert 0.5 <= found.mean() and not (planted == "contradicted").any()
    covered = np.mean([grid[3]["ci_lo"] <= 0.10 <= grid[3]["ci_hi"] for grid in rows])
    assert covered >= 0.93
    assert np.isin(np.delete(verdicts, 3, axis=1), FALSE_AT_NULL).any(axis=1).mean() <= ALPHA
