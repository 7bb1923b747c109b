"""Synthetic families of claims-table rows under bimodal collapse, decided as a run decides them.

Each synthetic grid (klrl.simulation) has configurations whose seeds collapse with a probability;
its rows go through the same code as a run's (klrl.verdicts.test_row, decide_family): a seed
is collapsed when its pass@1 is below half the base's (the base: `base_rate`), mean rows
compare the seeds that did not collapse, rate rows the collapse counts, and the family is
Holm-corrected. `klrl power collapse` and the planted-effect tests measure with it:
    simulate_verdicts every row's verdict on each grid: how often a row with no true effect is
                      decisive (per row, and any row of the family: the family-wise rate Holm
                      holds at 5%), how often a planted effect is found
    pooled_false      the same comparison decided the way the claims table did before collapse
                      was a rate: every seed, the seed variance pooled over every configuration
                      (what the per-configuration rule was chosen against)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from klrl.claims import Claim, Term
from klrl.contrasts import SeedPool, contrast
from klrl.family import ALPHA, mean_test
from klrl.outcomes import below_collapse
from klrl.simulation import Scenario, simulate_grid
from klrl.verdicts import TermScores, decide_family, test_row

GREATER = Claim("planted-greater", "first > second", (Term(1, "first"), Term(-1, "second")), "in", "greater")
COLLAPSES_MORE = Claim("planted-rate", "first collapses more", (Term(1, "first"), Term(-1, "second")), "in", "greater", test="rate")
GROWTH = Claim("planted-growth", "first degrades along the axis beyond second",
               (Term(1, "first", lag="high"), Term(-1, "first", lag="low"), Term(-1, "second", lag="high"), Term(1, "second", lag="low")),
               "in", "less")


@dataclass(frozen=True)
class Design:
    """A synthetic grid: per configuration its true effect (population pass@1 − base_rate) and
    collapse probability; rows: (claim, configuration indices of its terms)."""

    effects: tuple[float, ...]
    collapse: tuple[float, ...]
    rows: tuple[tuple[Claim, tuple[int, ...]], ...]


def _terms(scenario: Scenario, claim: Claim, grid: list[np.ndarray], indices: tuple[int, ...]) -> list[TermScores]:
    terms = []
    for term, index in zip(claim.terms, indices):
        collapsed = np.array([below_collapse(mean, scenario.base_rate) for mean in grid[index].mean(1)])
        terms.append(TermScores(term.weight, f"config {index}{'@' + term.lag if term.lag != 'each' else ''}", grid[index], collapsed))
    return terms


def decide_grid(scenario: Scenario, design: Design, grid: list[np.ndarray]) -> list[dict]:
    """The design's rows on one grid, tested and decided as one Holm-corrected family."""
    survivors = [m[[not below_collapse(mean, scenario.base_rate) for mean in m.mean(1)]] for m in grid]
    pool = SeedPool.from_matrices(survivors)
    rows = [{"claim": claim.name} | test_row(claim, _terms(scenario, claim, grid, indices), pool) for claim, indices in design.rows]
    return decide_family(rows, tuple({claim.name: claim for claim, _ in design.rows}.values()))


def simulate_verdicts(scenario: Scenario, design: Design, grids: int, seed: int = 0) -> np.ndarray:
    """The verdict of every row (columns) on each of `grids` synthetic grids (rows)."""
    rng = np.random.default_rng(seed)
    verdicts = []
    for _ in range(grids):
        rows = decide_grid(scenario, design, simulate_grid(scenario, list(design.effects), rng, collapse=list(design.collapse)))
        verdicts.append([row["verdict"] for row in rows])
    return np.array(verdicts)


def pooled_false(scenario: Scenario, effects: list[float], collapse: list[float], grids: int, seed: int = 0) -> float:
    """Share of grids in which config 0 − config 1 is decisive at 5% two-sided when every seed
    is kept and the seed variance pooled over every configuration (the rule before collapse was
    a rate): under bimodal collapse with equal population means, this is the false-decision rate."""
    rng = np.random.default_rng(seed)
    decisive = 0
    for _ in range(grids):
        grid = simulate_grid(scenario, effects, rng, collapse=collapse)
        tested = contrast([(1.0, grid[0], False), (-1.0, grid[1], False)], SeedPool.from_matrices(grid))
        decisive += mean_test(GREATER, tested)["p"] < ALPHA
    return decisive / grids
