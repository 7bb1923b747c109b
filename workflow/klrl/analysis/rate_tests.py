"""Collapse rates of two configurations over strata (β, lag): the exact and bounded tests a rate claim is decided by.

A rate row holds, per stratum, the collapsed seeds and the seeds of a first and a second
configuration; its effect is the difference of the two collapse rates over all its seeds. It
answers the questions klrl.analysis.claim_family asks of any row, as klrl.analysis.contrasts.Contrast does:
    p_above(0), p_below(0)   the conditional exact test of equal rates (Fisher's, one-sided),
                             stratified when the row pools several strata: given each stratum's
                             margins, the first configuration's collapses summed over strata
                             have the convolution of hypergeometric distributions under the null
    p_above(t), p_below(t)   t ≠ 0 (a claim's declared size): from Clopper-Pearson bounds of each
                             rate, each at half the level (Bonferroni), the smallest level at which
                             the difference's bound passes t; conservative, and for pooled strata
                             the bound of the mean rate (a sum of binomials of unequal rates is
                             less dispersed than one binomial of their mean)
    interval(level)          the same bounds, two-sided

scipy is imported inside the functions that use it, here and in klrl.analysis.contrasts and
klrl.analysis.family: the Snakefile imports the claims' definitions (klrl.analysis.preregistration,
which imports these modules) at every Snakemake start, and scipy.stats would add about a second
of CPU to each (tests/analysis/test_preregistration.py holds that it does not).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RateRow:
    strata: tuple[tuple[int, int, int, int], ...]  # per stratum (collapsed, seeds) of the first, then the second

    @property
    def counts(self) -> tuple[int, int, int, int]:
        return tuple(int(sum(column)) for column in zip(*self.strata))

    @property
    def effect(self) -> float:
        first, n1, second, n2 = self.counts
        return first / n1 - second / n2

    def pooled_with(self, others: list["RateRow"]) -> "RateRow":
        return RateRow(self.strata + tuple(s for other in others for s in other.strata))

    def _null_distribution(self) -> tuple[np.ndarray, int]:
        """Under equal rates given every stratum's margins: the distribution of the first
        configuration's collapses summed over strata, and the observed sum."""
        from scipy import stats

        pmf = np.ones(1)
        for first, n1, second, n2 in self.strata:
            support = np.arange(0, n1 + 1)
            pmf = np.convolve(pmf, stats.hypergeom(n1 + n2, first + second, n1).pmf(support))
        return pmf, sum(first for first, _, _, _ in self.strata)

    def p_above(self, threshold: float) -> float:
        """One-sided p of 'the difference of rates is ≤ threshold' (small: it is above)."""
        if threshold == 0:
            pmf, observed = self._null_distribution()
            return float(min(1.0, pmf[observed:].sum()))
        return _smallest_level(lambda a: self._bounds(a)[0] > threshold)

    def p_below(self, threshold: float) -> float:
        """One-sided p of 'the difference of rates is ≥ threshold' (small: it is below)."""
        if threshold == 0:
            pmf, observed = self._null_distribution()
            return float(min(1.0, pmf[: observed + 1].sum()))
        return _smallest_level(lambda a: self._bounds(a)[1] < threshold)

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        return self._bounds((1 - level) / 2)

    def _bounds(self, alpha: float) -> tuple[float, float]:
        """One-sided bounds of the difference at level 1 − alpha each (each rate at alpha / 2)."""
        first, n1, second, n2 = self.counts
        half = alpha / 2
        return _lower(first, n1, half) - _upper(second, n2, half), _upper(first, n1, half) - _lower(second, n2, half)


def _upper(collapsed: int, seeds: int, alpha: float) -> float:
    return 1.0 if collapsed == seeds else _beta_quantile(1 - alpha, collapsed + 1, seeds - collapsed)


def _lower(collapsed: int, seeds: int, alpha: float) -> float:
    return 0.0 if collapsed == 0 else _beta_quantile(alpha, collapsed, seeds - collapsed + 1)


def _beta_quantile(level: float, a: float, b: float) -> float:
    from scipy import stats

    return float(stats.beta.ppf(level, a, b))


def _smallest_level(passes, steps: int = 50) -> float:
    """The smallest alpha in (0, 1] at which `passes(alpha)` holds (it holds from some alpha on)."""
    if not passes(1.0):
        return 1.0
    low, high = 1e-12, 1.0
    if passes(low):
        return low
    for _ in range(steps):
        middle = np.sqrt(low * high)
        low, high = (low, middle) if passes(middle) else (middle, high)
    return float(high)
