"""A t interval for a contrast between configurations' pass@1, for few seeds × many problems.

A configuration c has a seeds × problems matrix X_c of per-problem pass@1 (every seed, and every
configuration, sees the same problems). A contrast is Σ_c w_c · mean(X_c): a difference of two
configurations (w = +1, −1), a configuration against the base model, or a difference of
differences (+1, −1, −1, +1). Its uncertainty has two sources, modelled as

    X_c[s, j] = μ_c + u_cs + p_j + i_cj + e_csj

(u: seed effect, p: problem difficulty, i: the configuration's problem-specific effect, e: the
seed × problem residual, with the sampling noise of a few samples per problem). The standard
error of the contrast is

    SE² = Σ_c w_c² σ²_seed,c / n_c  +  σ²_interaction / m

σ²_seed,c is the variance of c's seed means (which carries e's share). How it is estimated is
the term's `Variance`:
    POOLED  seeds are few (2-5), so it is pooled over every configuration of the same evaluation
            set (`SeedPool`: the seed-to-seed spread taken as a property of the training recipe
            and task), but never taken below c's own estimate: a configuration whose seeds
            disagree keeps its own, larger spread with its own n_c − 1 degrees of freedom (the
            pooled terms are one estimate: their shares add before the Satterthwaite degrees of
            freedom are taken)
    OWN     c's own estimate alone (Welch): for the seeds that survived a collapsing
            configuration, whose spread need not be the recipe's (the claims table,
            klrl.analysis.verdicts, gives it these, and decides nothing from fewer than its
            minimum of survivors). A contrast with an OWN term takes the degrees of freedom of
            its smallest OWN estimate, n_c − 1 (Hsu's conservative choice), not Satterthwaite's,
            which, estimated from variances of 2-4 degrees of freedom, decide null rows above the
            nominal rate
    FIXED   no seed term (the base model: one deterministic "seed")
σ²_interaction is the variance over problems of the contrast's per-problem means, less e's share
(estimated from the two-way residuals, floored at 0). The degrees of freedom are
Welch-Satterthwaite's; intervals and p-values are the t distribution's.

Why not the two-level bootstrap of klrl.analysis.bootstrap: with 2-3 seeds it resamples among 3-10 seed
combinations and has no small-sample correction (its coverage and this interval's, by
simulation: `klrl power coverage`, docs/statistics.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np


class Variance(Enum):
    """How a term's seed variance is estimated (the module's docstring says when each applies)."""

    POOLED = "pooled"
    OWN = "own"
    FIXED = "fixed"


@dataclass(frozen=True)
class SeedPool:
    """Seed-level and residual variances pooled over configurations (each weighted by its df)."""

    seed_var: float  # variance of a configuration's seed means
    seed_df: int  # Σ (n_c − 1)
    residual_var: float  # seed × problem residual variance

    @classmethod
    def from_matrices(cls, matrices: list[np.ndarray]) -> "SeedPool":
        """Pool over the matrices (seeds × problems) that have ≥ 2 seeds; df 0 when none has."""
        seed_sum = residual_sum = 0.0
        seed_df = residual_df = 0
        for matrix in matrices:
            n, m = matrix.shape
            if n < 2:
                continue
            seed_sum += (n - 1) * matrix.mean(1).var(ddof=1)
            seed_df += n - 1
            residual_sum += np.square(_residuals(matrix)).sum()
            residual_df += (n - 1) * (m - 1)
        if seed_df == 0:
            return cls(np.nan, 0, np.nan)
        return cls(seed_sum / seed_df, seed_df, residual_sum / max(residual_df, 1))


@dataclass(frozen=True)
class Contrast:
    """An estimated contrast with its standard error and Welch-Satterthwaite degrees of freedom."""

    effect: float
    se: float
    df: float

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The two-sided t interval (NaN when there is no standard error)."""
        if not self.se > 0:
            return (self.effect, self.effect) if self.se == 0 else (np.nan, np.nan)
        from scipy import special  # here, not at the top: klrl.analysis.rate_tests says why

        half = (
            special.stdtrit(self.df, 0.5 + level / 2) * self.se
        )  # the t quantile (scipy.stats.t.ppf, without its overhead)
        return float(self.effect - half), float(self.effect + half)

    def p_above(self, threshold: float) -> float:
        """One-sided p-value of 'the true contrast is ≤ threshold' (small: it is above)."""
        if not self.se > 0:
            return np.nan if np.isnan(self.se) else float(self.effect <= threshold)
        from scipy import special  # here, not at the top: klrl.analysis.rate_tests says why

        return float(special.stdtr(self.df, -(self.effect - threshold) / self.se))  # the t survival function

    def p_below(self, threshold: float) -> float:
        """One-sided p-value of 'the true contrast is ≥ threshold' (small: it is below)."""
        return Contrast(-self.effect, self.se, self.df).p_above(-threshold)


def _residuals(matrix: np.ndarray) -> np.ndarray:
    return matrix - matrix.mean(1, keepdims=True) - matrix.mean(0, keepdims=True) + matrix.mean()


def _check(matrix: np.ndarray, problems: int | None) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=float)
    if matrix.ndim != 2 or 0 in matrix.shape:
        raise ValueError(f"scores: need a non-empty seeds × problems array, got shape {matrix.shape}")
    if problems is not None and matrix.shape[1] != problems:
        raise ValueError(f"scores: every configuration needs the same {problems} problems, got {matrix.shape[1]}")
    if not np.isfinite(matrix).all():
        raise ValueError("scores: NaN or infinite pass@1 values")
    return matrix


def contrast(terms: list[tuple[float, np.ndarray, Variance]], pool: SeedPool | None = None) -> Contrast:
    """The contrast Σ w·mean(X) of `terms` (weight, seeds × problems matrix, how its seed variance
    is estimated), with its standard error.

    A POOLED configuration with one seed takes the pooled seed variance; with none pooled, or an
    OWN one with one seed, the interval is NaN (an effect from one seed has no error bar).
    """
    pool = pool or SeedPool(np.nan, 0, np.nan)
    problems = None
    seed_terms: list[tuple[float, float]] = []  # (variance share, df) of configurations' own estimates
    own_df = np.inf  # the smallest df of an OWN term (Hsu)
    pooled_share = 0.0
    per_problem = 0.0
    residual_share = 0.0
    effect = 0.0
    for weight, matrix, variance in terms:
        matrix = _check(matrix, problems)
        problems = matrix.shape[1]
        n = matrix.shape[0]
        effect += weight * matrix.mean()
        per_problem = per_problem + weight * matrix.mean(0)
        if variance is Variance.FIXED:
            continue
        own = matrix.mean(1).var(ddof=1) if n >= 2 else np.nan
        if variance is Variance.OWN:
            own_df = min(own_df, n - 1)
        if variance is Variance.POOLED and pool.seed_df and not own > pool.seed_var:
            pooled_share += weight**2 * pool.seed_var / n  # one estimate: its terms add before Satterthwaite
        else:
            seed_terms.append((weight**2 * own / n, n - 1))
        residual = np.square(_residuals(matrix)).sum() / ((n - 1) * (problems - 1)) if n >= 2 else pool.residual_var
        residual_share += weight**2 * (0.0 if np.isnan(residual) else residual) / n
    interaction = max(0.0, float(np.var(per_problem, ddof=1)) - residual_share) / problems if problems > 1 else 0.0
    parts = [*seed_terms, (pooled_share, pool.seed_df), (interaction, problems - 1)]
    variance = sum(share for share, _ in parts)
    if not np.isfinite(variance):
        return Contrast(float(effect), np.nan, np.nan)
    if variance == 0:
        return Contrast(float(effect), 0.0, np.inf)
    df = min(own_df, variance**2 / sum(share**2 / df for share, df in parts if share > 0))
    return Contrast(float(effect), float(np.sqrt(variance)), float(df))
