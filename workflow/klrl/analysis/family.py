"""The tests of one row of the claims table and the correction over the run's family of rows.

Per row, one p-value (`p`, raw) of the null that the claim is undecided:
    mean, greater/less   two-sided t test of "the contrast is 0" (klrl.analysis.contrasts)
    mean, equivalent     inside the margin: TOST, the larger of the two one-sided p-values of
                         "the contrast is ≤ −margin" and "≥ +margin"; outside it: twice the
                         one-sided p-value of "the contrast lies within the margin" on that side
    rate                 Fisher's exact test (two-sided) of equal collapse rates on the 2 × 2
                         counts of collapsed and healthy seeds
The claims of one run are one family: every row with a p-value (not `at floor`, not `not in this
grid`) is corrected together by Holm's step-down method, which holds the family-wise error rate
(the chance of any false decisive row) at `ALPHA` whatever the dependence between rows.
A row is decisive when its Holm-adjusted p (`p_adjusted`) is below ALPHA: reproduced when the
estimate lies on the claim's side (inside the margin for "≈"), contradicted otherwise.
"""

from __future__ import annotations

import numpy as np
from scipy import stats as scipy_stats

from klrl.analysis.claims import Claim
from klrl.analysis.contrasts import Contrast

ALPHA = 0.05  # family-wise error rate (Holm)
CORRECTION = "Holm"
DECISIVE = ("reproduced", "contradicted")  # the verdicts a row in the family can reach
POWER = 0.8  # the power the seeds-for-equivalence column is sized for
REACHABLE_SEEDS = 32  # seeds per configuration beyond which a row says its power is out of reach (klrl power's ceiling)


def mean_test(claim: Claim, tested: Contrast) -> dict:
    """Effect, interval (95%; 90% for "≈", the TOST interval) and raw p of one mean contrast."""
    if claim.direction == "equivalent":
        level, margin = 0.90, claim.margin
        if abs(tested.effect) < margin:
            p = max(tested.p_above(-margin), tested.p_below(margin))
        else:
            p = 2 * (tested.p_above(margin) if tested.effect > 0 else tested.p_below(-margin))
    else:
        level = 0.95
        p = 2 * min(tested.p_above(0.0), tested.p_below(0.0))
    lo, hi = tested.interval(level)
    return {"effect": tested.effect, "ci_level": level, "ci_lo": lo, "ci_hi": hi, "p": min(float(p), 1.0)}


def rate_test(collapsed: tuple[int, int], seeds: tuple[int, int]) -> dict:
    """Difference of collapse rates (first − second) and Fisher's exact two-sided p."""
    table = [[collapsed[0], seeds[0] - collapsed[0]], [collapsed[1], seeds[1] - collapsed[1]]]
    if min(seeds) < 1:
        return {"effect": np.nan, "p": np.nan}
    p = scipy_stats.fisher_exact(table).pvalue
    return {"effect": collapsed[0] / seeds[0] - collapsed[1] / seeds[1], "p": float(p)}


def holm(p_values: list[float]) -> list[float]:
    """Holm-adjusted p-values, in the given order (NaN stays NaN and is not counted)."""
    values = np.asarray(p_values, dtype=float)
    finite = np.flatnonzero(np.isfinite(values))
    order = finite[np.argsort(values[finite], kind="stable")]
    adjusted = np.full(values.shape, np.nan)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * values[index]))
        adjusted[index] = running
    return adjusted.tolist()


def decide(claim: Claim, effect: float, p_adjusted: float) -> str:
    """reproduced / contradicted / inconclusive, from the adjusted p and the estimate's side."""
    if not p_adjusted < ALPHA:
        return "inconclusive"
    if claim.direction == "equivalent":
        on_side = abs(effect) < claim.margin
    else:
        on_side = effect > 0 if claim.direction == "greater" else effect < 0
    return "reproduced" if on_side else "contradicted"


def seeds_for_equivalence(se: float, seeds: int, margin: float, power: float = POWER) -> float:
    """Seeds per configuration for `power` of TOST at a true difference of 0 (5% each side), the
    standard error scaled from `se` measured at `seeds` (every variance share taken to shrink
    with the seeds, so a lower bound): margin / se' ≥ z(0.95) + z((1 + power) / 2)."""
    if not (se > 0 and seeds >= 1):
        return np.nan
    needed = (scipy_stats.norm.ppf(0.95) + scipy_stats.norm.ppf(0.5 + power / 2)) * se / margin
    return float(np.ceil(seeds * needed**2))
