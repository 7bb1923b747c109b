"""Synthetic families of claims-table rows under bimodal collapse, decided as a run decides them.

Each synthetic grid (klrl.analysis.simulation) has configurations whose seeds collapse with a probability;
its rows go through the same code as a run's (klrl.analysis.verdicts.tested_row, klrl.analysis.claim_table,
each row a claim of its own, the design's claims one family): a seed
is collapsed when its pass@1 is below half the base's (the base: `base_rate`), mean rows
compare the seeds that did not collapse, rate rows the collapse counts, and the family of claims
is corrected as a run's (klrl.analysis.claim_family). `klrl power collapse` and the planted-effect tests measure with it:
    simulate_verdicts every row's verdict on each grid: how often a row with no true effect is
                      falsely decided (per claim, and any claim of the family: the family-wise
                      rate held at 5%), how often a planted effect is found
    pooled_false      the same comparison decided the way the claims table did before collapse
                      was a rate: every seed, the seed variance pooled over every configuration
                      (what the per-configuration rule was chosen against)
    survivor_rate     how often a null mean row whose collapsing side kept a given number of
                      survivors, spread wider than the pool, is decisive alone: by the table's
                      rule, or with the survivors' variance taken from the pool (the rule before)
    fit_collapse      a scenario fitted to a run's tables or its published tables: its seed
                      SD, base rate, seeds, and each configuration's collapse probability
    collapse_report   the false-decision rates, coverage and power on grids like a scenario, and
                      the replaced rules' false-decision rates (`klrl power collapse`)
Survivors of a collapsing configuration may spread wider than stable configurations' seeds
(`survivor_sd`: their seed SD as a multiple of the scenario's). `pooled=True` decides a design
with the rule the table had before (every survivor's variance from the pool, any number of
survivors: `PooledTerm`), for the comparison in docs/statistics.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from klrl.analysis.claims import Claim, Term
from klrl.analysis.contrasts import SeedPool, Variance, contrast
from klrl.analysis.claim_family import ALPHA
from klrl.analysis.claim_table import claim_table
from klrl.analysis.outcomes import below_collapse
from klrl.analysis.simulation import Scenario, simulate_grid
from klrl.analysis.published import PublishedResults, is_published
from klrl.analysis.verdicts import MIN_SURVIVORS, TermScores, tested_row, variance_rows

GREATER = Claim("planted-greater", "first > second", (Term(1, "first"), Term(-1, "second")), "in", "greater", size=0.10)
COLLAPSES_MORE = Claim(
    "planted-rate",
    "first collapses more",
    (Term(1, "first"), Term(-1, "second")),
    "in",
    "greater",
    test="rate",
    size=0.5,
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
    size=-0.10,
)
FALSE_AT_NULL = ("reproduced", "reproduced, below its size")  # false where the effect is 0 ("contradicted": it is ≤ 0)


@dataclass(frozen=True)
class Design:
    """A synthetic grid: per configuration its true effect (population pass@1 − base_rate) and
    collapse probability; rows: (claim, configuration indices of its terms)."""

    effects: tuple[float, ...]
    collapse: tuple[float, ...]
    rows: tuple[tuple[Claim, tuple[int, ...]], ...]
    survivor_sd: float = 1.0  # seed SD of a collapsing configuration's survivors, × the scenario's
    pooled: bool = False  # decided by the rule before: survivors' variance from the pool, any number

    def seed_sds(self, scenario: Scenario) -> list[float]:
        return [scenario.seed_sd * (self.survivor_sd if 0 < q < 1 else 1.0) for q in self.collapse]


class PooledTerm(TermScores):
    """A term decided by the rule the claims table had before: its survivors' variance from the
    pool (never below their own), whatever their number."""

    def variance(self) -> Variance:
        return Variance.FIXED if self.fixed else Variance.POOLED

    def too_few_reason(self) -> str:
        return ""


def _terms(
    scenario: Scenario, claim: Claim, grid: list[np.ndarray], indices: tuple[int, ...], pooled: bool = False
) -> list[TermScores]:
    terms = []
    for term, index in zip(claim.terms, indices):
        collapsed = np.array([below_collapse(mean, scenario.base_rate) for mean in grid[index].mean(1)])
        label = f"config {index}{'@' + term.lag if term.lag != 'each' else ''}"
        terms.append((PooledTerm if pooled else TermScores)(term.weight, label, grid[index], collapsed))
    return terms


def decide_grid(scenario: Scenario, design: Design, grid: list[np.ndarray]) -> list[dict]:
    """The design's rows on one grid, each a claim of its own, decided as one family of claims
    (klrl.analysis.claim_table): per row its descriptive test and its claim's verdict (a row that
    could not be tested keeps why: at floor, too few survivors)."""
    survivors = [m[[not below_collapse(mean, scenario.base_rate) for mean in m.mean(1)]] for m in grid]
    pool = SeedPool.from_matrices(survivors)
    claims = tuple(replace(claim, name=f"{claim.name}-{k}") for k, (claim, _) in enumerate(design.rows))
    rows = [
        {"claim": claim.name, "model": "", "task": ""}
        | tested_row(claim, _terms(scenario, claim, grid, indices, design.pooled), pool)
        for claim, (_, indices) in zip(claims, design.rows)
    ]
    decided = claim_table(rows, claims)
    return [row | {"verdict": claim["verdict"]} if "_test" in row else row for row, claim in zip(rows, decided)]


def simulate_rows(scenario: Scenario, design: Design, grids: int, seed: int = 0) -> list[list[dict]]:
    """The decided rows of the design on each of `grids` synthetic grids."""
    rng = np.random.default_rng(seed)
    effects, collapse, sds = list(design.effects), list(design.collapse), design.seed_sds(scenario)
    return [
        decide_grid(scenario, design, simulate_grid(scenario, effects, rng, seed_sds=sds, collapse=collapse))
        for _ in range(grids)
    ]


def simulate_verdicts(scenario: Scenario, design: Design, grids: int, seed: int = 0) -> np.ndarray:
    """The verdict of every row (columns) on each of `grids` synthetic grids (rows)."""
    return np.array([[row["verdict"] for row in rows] for rows in simulate_rows(scenario, design, grids, seed)])


def survivor_rate(
    scenario: Scenario, survivors: int, survivor_sd: float, grids: int, seed: int = 0, pooled: bool = False
) -> float:
    """Share of grids in which a null mean row is decisive alone (a family of one): config 0, of
    which `survivors` seeds did not collapse (the rest did), spread `survivor_sd` × the
    scenario's seed SD, against a stable config 1 of the same survivors' pass@1, the pool over
    8 configurations. `pooled`: decided by the rule before (PooledTerm)."""
    if not 1 <= survivors < scenario.seeds:
        raise ValueError(
            f"survivors {survivors}: need 1 to {scenario.seeds - 1} of the scenario's {scenario.seeds} seeds"
        )
    rng = np.random.default_rng(seed)
    sds = [scenario.seed_sd * survivor_sd] + [scenario.seed_sd] * 7
    design = Design((0.0,) * 8, (0.0,) * 8, ((GREATER, (0, 1)),), pooled=pooled)
    decisive = 0
    for _ in range(grids):
        grid = simulate_grid(scenario, [0.0] * 8, rng, seed_sds=sds)
        dead = rng.binomial(scenario.samples, scenario.collapsed_rate, (scenario.seeds - survivors, scenario.problems))
        grid[0][survivors:] = dead / scenario.samples
        [row] = decide_grid(scenario, design, grid)
        decisive += row["verdict"] in FALSE_AT_NULL
    return decisive / grids


def pooled_false(scenario: Scenario, effects: list[float], collapse: list[float], grids: int, seed: int = 0) -> float:
    """Share of grids in which config 0 − config 1 is decisive at 5% two-sided when every seed
    is kept and the seed variance pooled over every configuration (the rule before collapse was
    a rate): under bimodal collapse with equal population means, this is the false-decision rate."""
    rng = np.random.default_rng(seed)
    decisive = 0
    for _ in range(grids):
        grid = simulate_grid(scenario, effects, rng, collapse=collapse)
        tested = contrast(
            [(1.0, grid[0], Variance.POOLED), (-1.0, grid[1], Variance.POOLED)], SeedPool.from_matrices(grid)
        )
        decisive += 2 * min(tested.p_above(0.0), tested.p_below(0.0)) < ALPHA
    return decisive / grids


def fit_collapse(tables: Path) -> tuple[Scenario, list[float]]:
    """A scenario and the per-configuration collapse probabilities of a run, from its tables
    (results/<experiment>/tables) or its published tables (docs/results/<experiment>,
    klrl.analysis.published): in domain, a seed collapsed when its cell diverged or its pass@1 is
    below half the base's (klrl.analysis.outcomes); the seed SD is the variance table's (pooled over
    seeds that did not collapse), the base rate the median pass@1 of those seeds, the seeds the most
    any configuration has, the problems the evaluation set's. Cells not trained are left out."""
    cells, in_domain = _published_cells(tables) if is_published(tables) else _run_cells(tables)
    per_config = cells.groupby(["model", "kl", "beta", "policy", "lag"])["collapsed"].agg(["mean", "size"])
    healthy = cells.loc[~cells["collapsed"], "pass@1"].dropna()
    scenario = Scenario(
        base_rate=float(np.clip(healthy.median(), 0.05, 0.95)) if len(healthy) else 0.5,
        seed_sd=float(in_domain["seed_sd"].iloc[0]),
        problems=int(in_domain["problems"].iloc[0]),
        seeds=int(per_config["size"].max()),
    )
    return scenario, [float(q) for q in per_config["mean"]]


def _in_domain_cells(tables: Path, rows: pd.DataFrame, variance: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`rows` (a row per cell × evaluation task) cut to the trained cells' in-domain rows, one per
    cell, and the variance table's in-domain row."""
    in_domain = variance[variance["domain"] == "in"]
    if in_domain.empty:
        raise ValueError(f"{tables}: no in-domain rows in the variance table to fit a collapse scenario to")
    task = in_domain["task"].iloc[0]
    trained = ((rows["task"] == task) | rows["task"].isna()) & rows["status"].isin(["completed", "diverged"])
    return rows[trained].drop_duplicates("cell"), in_domain  # a cell never evaluated has one row, task empty


def _run_cells(tables: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A run's tables: scores.csv's rows, collapsed as klrl.analysis.outcomes judges them."""
    scores, main = pd.read_csv(tables / "scores.csv"), pd.read_csv(tables / "main.csv")
    if main[main["domain"] == "in"].empty:
        raise ValueError(f"{tables}: no in-domain rows in main.csv to fit a collapse scenario to")
    cells, in_domain = _in_domain_cells(tables, scores, pd.read_csv(tables / "variance.csv"))
    below = np.array([below_collapse(s, b) for s, b in zip(cells["pass@1"], cells["base_pass@1"])], dtype=bool)
    return cells.assign(collapsed=(cells["status"] == "diverged").to_numpy() | below), in_domain


def _published_cells(tables: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A run's published tables: seeds.csv's rows with the collapse flags published beside them,
    and the variance table computed again from them."""
    variance = pd.DataFrame(variance_rows(PublishedResults(tables)))
    cells, in_domain = _in_domain_cells(tables, pd.read_csv(tables / "seeds.csv"), variance)
    return cells.assign(collapsed=cells["collapsed"].astype(bool)), in_domain


def collapse_report(
    scenario: Scenario,
    collapse: list[float],
    grids: int,
    seed: int = 0,
    effect: float = 0.10,
    survivor_sd: float = 1.0,
) -> list[tuple[str, float]]:
    """What the claims table does on grids like the scenario: configurations collapsing with
    `collapse` (their surviving seeds at the base rate, spread `survivor_sd` × the scenario's
    seed SD), one mean row per configuration against the least collapsing one (the control) and
    a rate row for the most bimodal one, each row a claim, one family; the same family by the rule before; one-
    and MIN_SURVIVORS-survivor null rows alone (where the scenario has more seeds); a planted `effect` on a stable configuration inside the
    family (coverage of the true difference, power)."""
    control = int(np.argmin(collapse))
    others = [i for i in range(len(collapse)) if i != control]
    stable = next((i for i in others if collapse[i] == 0), None)
    bimodal = min(others, key=lambda i: abs(collapse[i] - 0.5))
    null = tuple(-q * (scenario.base_rate - scenario.collapsed_rate) for q in collapse)
    rows = tuple((GREATER, (i, control)) for i in others) + ((COLLAPSES_MORE, (bimodal, control)),)
    design = Design(null, tuple(collapse), rows, survivor_sd)
    verdicts = simulate_verdicts(scenario, design, grids, seed)
    before = simulate_verdicts(scenario, replace(design, pooled=True), grids, seed)
    family = (
        f"family of {len(rows)} one-row claims, no true difference of means: share of grids with a false decision "
        "on a mean claim (5% family-wise)"
    )
    report = [
        (family, float(np.isin(verdicts[:, :-1], FALSE_AT_NULL).any(axis=1).mean())),
        (
            f"the same {family.removeprefix('family of ')}, survivors' variance from the pool (the rule before)",
            float(np.isin(before[:, :-1], FALSE_AT_NULL).any(axis=1).mean()),
        ),
        (
            f"mean claim, configuration collapsing in {collapse[bimodal]:.0%} of seeds against the control: falsely decided",
            float(np.isin(verdicts[:, others.index(bimodal)], FALSE_AT_NULL).mean()),
        ),
        (
            f"rate claim, {collapse[bimodal]:.0%} against {collapse[control]:.0%} collapsing: reproduced (power)",
            float(np.char.startswith(verdicts[:, -1].astype(str), "reproduced").mean()),
        ),
    ]
    for survivors in (n for n in (1, MIN_SURVIVORS) if n < scenario.seeds):
        for pooled, rule in ((False, "this rule"), (True, "the rule before")):
            report.append(
                (
                    f"a null mean row alone, {survivors} of {scenario.seeds} seeds surviving: falsely decided ({rule})",
                    survivor_rate(scenario, survivors, survivor_sd, grids, seed + 2, pooled),
                )
            )
    cap = (0.95 - scenario.base_rate) / (0.95 - scenario.collapsed_rate)  # the survivors' rate stays ≤ 0.95
    feasible = min(collapse[bimodal], cap)
    replaced = [feasible, 0.0] + [
        q if q == 1 else min(q, cap) for i, q in enumerate(collapse) if i not in (bimodal, control)
    ]
    report.append(
        (
            f"the rule before collapse was a rate (every seed, variance pooled), {feasible:.0%} collapsing against a "
            "stable configuration of the same population mean: decisive",
            pooled_false(scenario, [0.0] * len(collapse), replaced, grids, seed),
        )
    )
    if stable is not None:
        planted = list(null)
        planted[stable] = effect
        found = [
            rows_[others.index(stable)]
            for rows_ in simulate_rows(scenario, replace(design, effects=tuple(planted)), grids, seed + 1)
        ]
        report.append(
            (
                f"mean row, a stable configuration {effect:+g} above the control (the true difference): its 95% "
                "interval holds it (coverage)",
                float(np.mean([row["ci_lo"] <= effect <= row["ci_hi"] for row in found])),
            )
        )
        report.append(
            (
                f"the same claim reproduced inside the family of {len(rows)} claims (power as planned, after the correction)",
                float(np.mean([row["verdict"].startswith("reproduced") for row in found])),
            )
        )
    return report
