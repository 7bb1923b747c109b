"""Claims as the family: one pre-declared test per claim at the size it means, Holm over claims.

A claim states an effect θ (a contrast between configurations) on one side of a `null` and means
it at a declared `size` beyond that null (direction `greater`: θ > null, meant as θ ≥ size;
`less`: mirrored). Its rows (one per β, lag or step of an axis) are combined into two one-sided
tests, each of one hypothesis, before any correction:
    present   H: θ ≤ null (the claim's effect is absent).  Rejected: the claim is reproduced.
    size      H: θ ≥ size (the effect is as large as the claim means).  Rejected: the data bound
              the effect below its size: the claim, as meant, is absent at this size.
How rows combine is the claim's `combine`, chosen by what its sentence says:
    every     "at every β / lag": an intersection-union test for `present` (p = the largest
              row p; every row must reject, no correction within the claim), and for `size` any
              row bounded below the size contradicts the universal claim (p = the smallest row
              p × the rows, Bonferroni within the claim: with R rows and no correction, a true
              universal claim would be falsely contradicted in up to R × 5% of studies)
    pooled    one effect common to the strata: the fixed-effect (inverse-variance) mean of the
              rows' contrasts, with the smallest row's degrees of freedom (conservative)
The family is the claims. Both hypotheses of every claim are corrected together by Holm's
step-down method with Shaffer's logical restriction: a claim's two hypotheses cannot both be
true (size lies beyond null), so at step j the multiplier is the number of claims with a
hypothesis not yet rejected, not the number of hypotheses left (Shaffer 1986). That holds the
chance of any false decision at `ALPHA` whatever the dependence between claims.
Verdicts: reproduced (present rejected); reproduced, below its size (both rejected: the effect is
there, smaller than meant); absent at its size (size rejected), named contradicted when the
bound at the level that rejected it lies beyond the null on the wrong side; inconclusive.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from klrl.analysis.contrasts import Contrast
from klrl.analysis.rate_tests import RateRow

ALPHA = 0.05
COMBINES = ("every", "pooled")
DIRECTIONS = ("greater", "less", "equivalent")


@dataclass(frozen=True)
class Side:
    """Which way a claim points (`greater`: θ > null; `equivalent`: |θ| < size, its null the
    same margin) and the two thresholds it is tested at. A row is any test of θ with `p_above`,
    `p_below` and `interval` (klrl.analysis.contrasts.Contrast, klrl.analysis.rate_tests.RateRow)."""

    direction: str  # greater | less | equivalent
    null: float
    size: float

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction {self.direction!r} is not one of {', '.join(DIRECTIONS)}")
        if self.direction == "equivalent":
            if not (self.size > 0 and self.null == self.size):
                raise ValueError(f"an equivalence margin {self.size:g} must be positive and its own null")
            return
        beyond = self.size > self.null if self.direction == "greater" else self.size < self.null
        if not beyond:
            raise ValueError(f"size {self.size:g} does not lie beyond null {self.null:g} on the {self.direction} side")

    def p_present(self, row) -> float:
        """One-sided p of 'θ lies at or behind the null' (small: the effect is there)."""
        if self.direction == "equivalent":  # TOST: both one-sided tests inside the margin
            return max(row.p_above(-self.size), row.p_below(self.size))
        return row.p_above(self.null) if self.direction == "greater" else row.p_below(self.null)

    def p_size(self, row) -> float:
        """One-sided p of 'θ reaches the size' (small: the effect falls short of it; for "≈": it
        lies outside the margin, either side, Bonferroni over the two)."""
        if self.direction == "equivalent":
            return min(1.0, 2 * min(row.p_above(self.size), row.p_below(-self.size)))
        return row.p_below(self.size) if self.direction == "greater" else row.p_above(self.size)

    def p_wrong_side(self, row) -> float:
        """One-sided p of 'θ lies on the claim's side of the null' (small: it points the other way)."""
        if self.direction == "equivalent":
            return self.p_size(row)
        return row.p_below(self.null) if self.direction == "greater" else row.p_above(self.null)

    def bound(self, row, level: float) -> tuple[float, float]:
        """The one-sided confidence bound that the size test is the dual of (an upper bound for
        `greater`, a lower one for `less`; "≈": the two-sided interval): the interval whose ends they are."""
        return row.interval(2 * level - 1)


@dataclass(frozen=True)
class ClaimTest:
    """A claim's combined test: its estimate, the p of each hypothesis, and the contrast the size
    bound is read from (the pooled one, or the row that bounds an `every` claim)."""

    effect: float
    p_present: float
    p_size: float
    p_wrong_side: float
    bounding: object  # the row (or pooled row) whose bound is reported
    within: int  # the Bonferroni factor inside the claim (an `every` claim's rows; pooled: 1)


def welch(terms: list[tuple[float, np.ndarray]]) -> Contrast:
    """Σ w · mean(values) over configurations (weight, one value per seed), with Welch's standard
    error and Satterthwaite's degrees of freedom; NaN standard error when a term has one seed."""
    effect, shares = 0.0, []
    for weight, values in terms:
        values = np.asarray(values, dtype=float)
        if values.size < 2 or not np.isfinite(values).all():
            return Contrast(float(effect + weight * values.mean()) if values.size else np.nan, np.nan, np.nan)
        effect += weight * values.mean()
        shares.append((weight**2 * values.var(ddof=1) / values.size, values.size - 1))
    variance = sum(share for share, _ in shares)
    if variance == 0:
        return Contrast(float(effect), 0.0, np.inf)
    df = variance**2 / sum(share**2 / df for share, df in shares if share > 0)
    return Contrast(float(effect), float(np.sqrt(variance)), float(df))


def combine(side: Side, how: str, rows: list) -> ClaimTest:
    """The claim's test from its rows (module docstring: `every`, `pooled`); rows without a
    standard error (a configuration with one seed) leave the claim untested."""
    if how not in COMBINES:
        raise ValueError(f"combine {how!r} is not one of {', '.join(COMBINES)}")
    if not rows:
        raise ValueError("a claim's test needs at least one row")
    if any(isinstance(row, Contrast) and not row.se > 0 for row in rows):
        return ClaimTest(float(np.mean([row.effect for row in rows])), np.nan, np.nan, np.nan, rows[0], 1)
    if how == "pooled":
        pooled = _pooled(rows)
        return ClaimTest(
            pooled.effect, side.p_present(pooled), side.p_size(pooled), side.p_wrong_side(pooled), pooled, 1
        )
    sizes = [side.p_size(row) for row in rows]
    bounding = rows[int(np.argmin(sizes))]
    return ClaimTest(
        float(np.mean([row.effect for row in rows])),
        max(side.p_present(row) for row in rows),
        min(1.0, len(rows) * min(sizes)),
        min(1.0, len(rows) * side.p_wrong_side(bounding)),
        bounding,
        len(rows),
    )


def _pooled(rows: list):
    """One row for all the strata: rate rows pool their strata (an exact stratified test); mean
    contrasts their fixed-effect (inverse-variance) mean, with the smallest row's degrees of freedom."""
    if len(rows) == 1:
        return rows[0]
    if all(isinstance(row, RateRow) for row in rows):
        return rows[0].pooled_with(rows[1:])
    weights = np.array([1 / row.se**2 for row in rows])
    effect = float(np.dot(weights, [row.effect for row in rows]) / weights.sum())
    return Contrast(effect, float(1 / np.sqrt(weights.sum())), float(min(row.df for row in rows)))


def shaffer_holm(pairs: list[tuple[float, float]]) -> list[tuple[float, float, float]]:
    """Adjusted p of each claim's (present, size) hypotheses, and the multiplier its size
    hypothesis was tested with: Holm's step-down over all the hypotheses, the multiplier at each
    step the number of claims with a hypothesis not yet rejected (at most one of a claim's two
    can be true). NaN p: not tested, not counted.
    >>> [tuple(round(v, 4) for v in claim) for claim in shaffer_holm([(0.01, 0.9), (0.02, 0.5)])]
    [(0.02, 1.0, 1), (0.04, 1.0, 2)]
    """
    hypotheses = [(p, claim, kind) for claim, pair in enumerate(pairs) for kind, p in enumerate(pair) if np.isfinite(p)]
    hypotheses.sort(key=lambda hypothesis: hypothesis[0])
    tested_claims = {claim for _, claim, _ in hypotheses}
    rejected: dict[int, int] = {}  # claim → its hypotheses counted as rejected so far
    adjusted = [[np.nan, np.nan, np.nan] for _ in pairs]
    running = 0.0
    for p, claim, kind in hypotheses:
        multiplier = len(tested_claims) - sum(1 for count in rejected.values() if count == 2)
        running = max(running, min(1.0, multiplier * p))
        adjusted[claim][kind] = running
        if kind == 1:
            adjusted[claim][2] = multiplier
        rejected[claim] = rejected.get(claim, 0) + 1
    return [tuple(values) for values in adjusted]


def verdict(test: ClaimTest, adjusted: tuple[float, float, float], side: Side) -> tuple[str, str]:
    """The claim's verdict and its reason, from its test and its adjusted p-values."""
    present, size, multiplier = adjusted
    if not (np.isfinite(present) or np.isfinite(size)):
        return "inconclusive", "no standard error (a configuration with fewer than 2 seeds)"
    level = 1 - ALPHA / ((multiplier if np.isfinite(multiplier) else 1) * test.within)
    low, high = side.bound(test.bounding, level)
    if side.direction == "equivalent":
        limit = f"between {low:.3g} and {high:.3g}"
    else:
        limit = f"at most {high:.3g}" if side.direction == "greater" else f"at least {low:.3g}"
    if present < ALPHA:
        if size < ALPHA:
            return "reproduced, below its size", f"{limit} (size {side.size:g})"
        return "reproduced", ""
    if size < ALPHA:
        if side.direction == "equivalent":
            return "contradicted", f"{limit}, outside ±{side.size:g}"
        wrong = np.isfinite(multiplier) and multiplier * test.p_wrong_side < ALPHA
        return ("contradicted" if wrong else "absent at its size"), f"{limit} (size {side.size:g})"
    return "inconclusive", ""


DECISION_COLUMNS = (
    "rows",
    "effect",
    "p_present",
    "p_size",
    "p_present_adjusted",
    "p_size_adjusted",
    "verdict",
    "reason",
)


NOT_TESTABLE = "not testable at this scale"
NOT_IN_GRID = "not in this grid"  # a claim whose configurations the grid lacks


def decide_claims(entries: list[tuple[Side, str, list]], seeds_needed: list[int | None] | None = None) -> list[dict]:
    """One family: each entry (a claim on one model) is its side, how its rows combine and its
    rows' tests (none: the claim is not in this grid); per entry the DECISION_COLUMNS. An entry
    whose `seeds_needed` is given was declared not testable at this scale by the study's plan:
    it is reported so, with the seeds it would need, and left out of the family."""
    seeds_needed = seeds_needed or [None] * len(entries)
    tested = [
        combine(side, how, rows) if rows and not needed else None
        for (side, how, rows), needed in zip(entries, seeds_needed)
    ]
    adjusted = shaffer_holm([(t.p_present, t.p_size) if t else (np.nan, np.nan) for t in tested])
    decisions = []
    for (side, _, rows), test, adjusted_p, needed in zip(entries, tested, adjusted, seeds_needed):
        if needed:
            reason = f"the plan declared it: {needed} or more seeds per configuration for 80% power at its size"
            decisions.append({"rows": len(rows), "verdict": NOT_TESTABLE, "reason": reason})
            continue
        if test is None:
            decisions.append({"rows": 0, "verdict": NOT_IN_GRID, "reason": ""})
            continue
        decided, reason = verdict(test, adjusted_p, side)
        decisions.append(
            {
                "rows": len(rows),
                "effect": test.effect,
                "p_present": test.p_present,
                "p_size": test.p_size,
                "p_present_adjusted": adjusted_p[0],
                "p_size_adjusted": adjusted_p[1],
                "verdict": decided,
                "reason": reason,
            }
        )
    return decisions
