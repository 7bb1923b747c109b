"""The tests of one row of the claims table and the correction over the run's family of rows.

Per row, one p-value (`p`, raw) of the null that the claim is undecided:
    mean, greater/less   two-sided t test of "the contrast is 0" (klrl.analysis.contrasts)
    mean, equivalent     inside the margin: TOST, the larger of the two one-sided p-values of
                         "the contrast is ≤ −margin" and "≥ +margin"; outside it: twice the
                         one-sided p-value of "the contrast lies within the margin" on that side
    rate                 Fisher's exact test (two-sided) of equal collapse rates on the 2 × 2
                         counts of collapsed and healthy seeds
The claims of one run are one family: every row with a p-value (not `at floor`, `too few
survivors` or `not in this grid`) that Tarone's rule keeps is corrected together by Holm's
step-down method, which holds the family-wise error rate (the chance of any false decisive row)
at `ALPHA` whatever the dependence between rows. Tarone's rule: a rate row's exact p cannot fall
below the smallest p of any table with its margins (its seeds and its total of collapses:
0 of 11 against 0 of 11 can only give p = 1); with K the smallest k such that at most k rows can
reach p < ALPHA / k, the rows that cannot are left out (`degenerate`). The margins fix which rows
stay, and given the margins each kept row's p is still valid, so Holm over the kept rows holds
the rate (Tarone 1990; Hommel and Krummenauer 1998); a mean row can reach any p and always stays.
A row is decisive when its Holm-adjusted p (`p_adjusted`) is below ALPHA: reproduced when the
estimate lies on the claim's side (inside the margin for "≈"), contradicted otherwise.
A claim's verdict follows from all its rows (`claim_verdict`): a claim is stated for every β,
lag and evaluation set its rows cover, so it is reproduced only when every row is.
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
    """Difference of collapse rates (first − second), Fisher's exact two-sided p, and the smallest
    p any table with the same margins could give (`p_min`, for Tarone's rule)."""
    if min(seeds) < 1:
        return {"effect": np.nan, "p": np.nan}
    total = sum(collapsed)
    splits = range(max(0, total - seeds[1]), min(total, seeds[0]) + 1)
    p_min = min(fisher_p(x, total - x, seeds) for x in splits)
    return {
        "effect": collapsed[0] / seeds[0] - collapsed[1] / seeds[1],
        "p": fisher_p(*collapsed, seeds),
        "p_min": p_min,
    }


def fisher_p(first: int, second: int, seeds: tuple[int, int]) -> float:
    """Fisher's exact two-sided p of equal rates: `first` of seeds[0] against `second` of seeds[1]."""
    return float(scipy_stats.fisher_exact([[first, seeds[0] - first], [second, seeds[1] - second]]).pvalue)


def tarone(p_min: list[float], alpha: float = ALPHA) -> tuple[list[bool], float]:
    """Tarone's rule: which rows stay in the family (those whose smallest attainable p is below
    alpha / K, K the smallest k with at most k such rows) and that threshold alpha / K."""
    p_min = np.asarray(p_min, dtype=float)
    for k in range(1, len(p_min) + 1):
        kept = p_min < alpha / k
        if kept.sum() <= k:
            return kept.tolist(), alpha / k
    return [], alpha  # no rows


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


def claim_verdict(verdicts: list[str]) -> str:
    """A claim's verdict from the verdicts of all its rows: reproduced when every row is
    reproduced; contradicted when a row is contradicted and none reproduced; mixed when rows are
    of both; otherwise the verdict all its rows share (at floor, not in this grid, ...) or
    inconclusive."""
    kinds = set(verdicts)
    if kinds >= set(DECISIVE):
        return "mixed"
    if "contradicted" in kinds:
        return "contradicted"
    if len(kinds) == 1:
        return verdicts[0]
    return "inconclusive"


CLAIM_RULE = (
    "a claim is reproduced when every one of its rows is reproduced, contradicted when a row is contradicted "
    "and none reproduced, mixed when rows are of both, otherwise inconclusive (or what every row is)"
)


def seeds_for_equivalence(se: float, seeds: int, margin: float, power: float = POWER) -> float:
    """Seeds per configuration for `power` of TOST at a true difference of 0 (5% each side), the
    standard error scaled from `se` measured at `seeds` (every variance share taken to shrink
    with the seeds, so a lower bound): margin / se' ≥ z(0.95) + z((1 + power) / 2)."""
    if not (se > 0 and seeds >= 1):
        return np.nan
    needed = (scipy_stats.norm.ppf(0.95) + scipy_stats.norm.ppf(0.5 + power / 2)) * se / margin
    return float(np.ceil(seeds * needed**2))
