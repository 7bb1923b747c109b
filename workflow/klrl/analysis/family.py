"""The claims table's rule in words, and the sizing helpers its rows report.

The claims of one run are one family (klrl.analysis.claim_family): each claim has one test
over its rows at the size it declares (klrl.analysis.claims), and the claims' hypotheses are
corrected together, Holm's step-down method with Shaffer's restriction, at `ALPHA` family-wise.
A row of a claim (klrl.analysis.verdicts) is a descriptive estimate with its interval and raw p:
    mean, greater/less   one-sided t test on the claim's side (klrl.analysis.contrasts)
    mean, equivalent     TOST inside the margin
    rate                 the conditional exact test of equal collapse rates (Fisher's, one-sided;
                         klrl.analysis.rate_tests), with Clopper-Pearson bounds of the difference
"""

from __future__ import annotations

import numpy as np

CORRECTION = "Holm with Shaffer's restriction, over the claims"
POWER = 0.8  # the power the seeds-for-equivalence column is sized for
REACHABLE_SEEDS = 32  # seeds per configuration beyond which a row says its power is out of reach (klrl power's ceiling)

CLAIM_RULE = (
    "each claim is one test at its declared size, its rows combined as its sentence says (every β or lag: all "
    "rows must show it, and one row short of the size contradicts it; pooled: one estimate over the strata), "
    "the claims' hypotheses corrected together (Holm, Shaffer's restriction, 5% family-wise); reproduced when "
    "its effect is shown, absent at its size when the data bound it short of the size (contradicted when "
    "that bound lies on the other side of 0), otherwise inconclusive; rows are descriptive"
)


def fisher_p(first: int, second: int, seeds: tuple[int, int]) -> float:
    """Fisher's exact two-sided p of equal rates: `first` of seeds[0] against `second` of seeds[1]."""
    from scipy import stats as scipy_stats  # here, not at the top: klrl.analysis.rate_tests says why

    return float(scipy_stats.fisher_exact([[first, seeds[0] - first], [second, seeds[1] - second]]).pvalue)


def seeds_for_equivalence(se: float, seeds: int, margin: float, power: float = POWER) -> float:
    """Seeds per configuration for `power` of TOST at a true difference of 0 (5% each side), the
    standard error scaled from `se` measured at `seeds` (every variance share taken to shrink
    with the seeds, so a lower bound): margin / se' ≥ z(0.95) + z((1 + power) / 2)."""
    if not (se > 0 and seeds >= 1):
        return np.nan
    from scipy import stats as scipy_stats  # here, not at the top: klrl.analysis.rate_tests says why

    needed = (scipy_stats.norm.ppf(0.95) + scipy_stats.norm.ppf(0.5 + power / 2)) * se / margin
    return float(np.ceil(seeds * needed**2))
