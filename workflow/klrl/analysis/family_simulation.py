"""Synthetic families of claims-table rows under bimodal collapse, decided as a run decides them.

Each synthetic grid (klrl.analysis.simulation) has configurations whose seeds collapse with a probability;
its rows go through the same code as a run's (klrl.analysis.verdicts.tested_row, decide_family): a seed
is collapsed when its pass@1 is below half the base's (the base: `base_rate`), mean rows
compare the seeds that did not collapse, rate rows the collapse counts, and the family is
Holm-corrected. `klrl power collapse` and the planted-effect tests measure with it:
    simulate_verdicts every row's verdict on each grid: how often a row with no true effect is
                      decisive (per row, and any row of the family: the family-wise rate Holm
                      holds at 5%), how often a planted effect is found
    pooled_false      the same comparison decided the way the claims table did before collapse
                      was a rate: every seed, the seed variance pooled over every configuration
                      (what the per-configuration rule was chosen against)
    fit_collapse      a scenario fitted to a run's tables: its seed SD, base rate, seeds, and
                      each configuration's collapse probability
    collapse_report   the false-decision rates, coverage and power on grids like a scenario, and
                      the replaced rule's false-decision rate (`klrl power collapse`)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from klrl.analysis.claims import Claim, Term
from klrl.analysis.contrasts import SeedPool, contrast
from klrl.analysis.family import ALPHA, DECISIVE, mean_test
from klrl.analysis.outcomes import below_collapse
from klrl.analysis.simulation import Scenario, simulate_grid
from klrl.analysis.verdicts import TermScores, decide_family, tested_row

GREATER = Claim("planted-greater", "first > second", (Term(1, "first"), Term(-1, "second")), "in", "greater")
COLLAPSES_MORE = Claim(
    "planted-rate", "first collapses more", (Term(1, "first"), Term(-1, "second")), "in", "greater", test="rate"
)
GROWTH = Claim(
    "planted-growth",
    "first degrades along the axis beyond second",
    (
        Term(1, "first", lag="high"),
        Term(-1, "first", lag="low"),
        Term(-1, "second", lag="high"),
        Term(1, "second", lag="low"),
    ),
    "in",
    "less",
)


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
        terms.append(
            TermScores(
                term.weight, f"config {index}{'@' + term.lag if term.lag != 'each' else ''}", grid[index], collapsed
            )
        )
    return terms


def decide_grid(scenario: Scenario, design: Design, grid: list[np.ndarray]) -> list[dict]:
    """The design's rows on one grid, tested and decided as one Holm-corrected family."""
    survivors = [m[[not below_collapse(mean, scenario.base_rate) for mean in m.mean(1)]] for m in grid]
    pool = SeedPool.from_matrices(survivors)
    rows = [
        {"claim": claim.name} | tested_row(claim, _terms(scenario, claim, grid, indices), pool)
        for claim, indices in design.rows
    ]
    return decide_family(rows, tuple({claim.name: claim for claim, _ in design.rows}.values()))


def simulate_rows(scenario: Scenario, design: Design, grids: int, seed: int = 0) -> list[list[dict]]:
    """The decided rows of the design on each of `grids` synthetic grids."""
    rng = np.random.default_rng(seed)
    return [
        decide_grid(
            scenario, design, simulate_grid(scenario, list(design.effects), rng, collapse=list(design.collapse))
        )
        for _ in range(grids)
    ]


def simulate_verdicts(scenario: Scenario, design: Design, grids: int, seed: int = 0) -> np.ndarray:
    """The verdict of every row (columns) on each of `grids` synthetic grids (rows)."""
    return np.array([[row["verdict"] for row in rows] for rows in simulate_rows(scenario, design, grids, seed)])


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


def fit_collapse(tables: Path) -> tuple[Scenario, list[float]]:
    """A scenario and the per-configuration collapse probabilities of a run, from its tables:
    in domain, a seed collapsed when its cell diverged or its pass@1 is below half the base's
    (klrl.analysis.outcomes); the seed SD is the variance table's (pooled over seeds that did not
    collapse), the base rate the median pass@1 of those seeds, the seeds the most any
    configuration has, the problems the evaluation set's. Cells not trained are left out."""
    scores, main = pd.read_csv(tables / "scores.csv"), pd.read_csv(tables / "main.csv")
    variance = pd.read_csv(tables / "variance.csv")
    in_domain = variance[variance["domain"] == "in"]
    if in_domain.empty or main[main["domain"] == "in"].empty:
        raise ValueError(f"{tables}: no in-domain rows in variance.csv and main.csv to fit a collapse scenario to")
    task = in_domain["task"].iloc[0]
    cells = scores[
        ((scores["task"] == task) | scores["task"].isna()) & scores["status"].isin(["completed", "diverged"])
    ]
    cells = cells.drop_duplicates("cell")  # a cell never evaluated has one row, task empty
    below = np.array([below_collapse(s, b) for s, b in zip(cells["pass@1"], cells["base_pass@1"])], dtype=bool)
    cells = cells.assign(collapsed=(cells["status"] == "diverged").to_numpy() | below)
    per_config = cells.groupby(["model", "kl", "beta", "policy", "lag"])["collapsed"].agg(["mean", "size"])
    healthy = cells.loc[~cells["collapsed"], "pass@1"].dropna()
    scenario = Scenario(
        base_rate=float(np.clip(healthy.median(), 0.05, 0.95)) if len(healthy) else 0.5,
        seed_sd=float(in_domain["seed_sd"].iloc[0]),
        problems=int(in_domain["problems"].iloc[0]),
        seeds=int(per_config["size"].max()),
    )
    return scenario, [float(q) for q in per_config["mean"]]


def collapse_report(
    scenario: Scenario, collapse: list[float], grids: int, seed: int = 0, effect: float = 0.10
) -> list[tuple[str, float]]:
    """What the claims table does on grids like the scenario: configurations collapsing with
    `collapse` (their surviving seeds at the base rate), one mean row per configuration against
    the least collapsing one (the control) and a rate row for the most bimodal one, one Holm family."""
    control = int(np.argmin(collapse))
    others = [i for i in range(len(collapse)) if i != control]
    stable = next((i for i in others if collapse[i] == 0), None)
    bimodal = min(others, key=lambda i: abs(collapse[i] - 0.5))
    null = tuple(-q * (scenario.base_rate - scenario.collapsed_rate) for q in collapse)
    rows = tuple((GREATER, (i, control)) for i in others) + ((COLLAPSES_MORE, (bimodal, control)),)
    verdicts = simulate_verdicts(scenario, Design(null, tuple(collapse), rows), grids, seed)
    decided = [row for row, i in enumerate(others) if collapse[i] < 1]
    report = [
        (
            f"family of {len(rows)} rows, no true effect: share of grids with a decisive row (Holm, 5%)",
            float(np.isin(verdicts[:, decided], DECISIVE).any(axis=1).mean()),
        ),
        (
            f"mean row, configuration collapsing in {collapse[bimodal]:.0%} of seeds against the control: decisive",
            float(np.isin(verdicts[:, others.index(bimodal)], DECISIVE).mean()),
        ),
        (
            f"rate row, {collapse[bimodal]:.0%} against {collapse[control]:.0%} collapsing: reproduced (power)",
            float((verdicts[:, -1] == "reproduced").mean()),
        ),
    ]
    cap = (0.95 - scenario.base_rate) / (0.95 - scenario.collapsed_rate)  # the survivors' rate stays ≤ 0.95
    feasible = min(collapse[bimodal], cap)
    replaced = [feasible, 0.0] + [
        q if q == 1 else min(q, cap) for i, q in enumerate(collapse) if i not in (bimodal, control)
    ]
    report.append(
        (
            f"the rule it replaced (every seed, variance pooled), {feasible:.0%} collapsing against a stable "
            "configuration of the same population mean: decisive",
            pooled_false(scenario, [0.0] * len(collapse), replaced, grids, seed),
        )
    )
    if stable is not None:
        planted = list(null)
        planted[stable] = effect
        found = [
            rows_[others.index(stable)]
            for rows_ in simulate_rows(scenario, Design(tuple(planted), tuple(collapse), rows), grids, seed + 1)
        ]
        report.append(
            (
                f"mean row, a stable configuration {effect:+g} above the control: its 95% interval holds {effect:g} (coverage)",
                float(np.mean([row["ci_lo"] <= effect <= row["ci_hi"] for row in found])),
            )
        )
        report.append(
            (
                "the same row reproduced (power, after Holm)",
                float(np.mean([row["verdict"] == "reproduced" for row in found])),
            )
        )
    return report
