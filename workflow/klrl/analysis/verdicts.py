"""The claims table: each declared claim (klrl.analysis.claims) tested on a run's cells, and its verdict.

A cell's seed is *collapsed* when its training was stopped (status `diverged`) or its in-domain
pass@1 is below half the base model's (klrl.analysis.outcomes.below_collapse): collapse is bimodal (a
run collapses or it does not), so
    rate claims   compare the share of collapsed seeds of two configurations (exact test, klrl.analysis.family)
    mean claims   compare the pass@1 of the seeds that did not collapse (klrl.analysis.contrasts): a
                  configuration none of whose seeds collapsed takes the seed variance pooled over
                  the non-collapsed seeds of every configuration of the evaluation set (never
                  below its own); one with collapsed seeds takes its survivors' own variance
                  (Welch), whose spread need not be the pool's, and with fewer than
                  MIN_SURVIVORS survivors the row is `too few survivors` (docs/statistics.md has
                  the simulations behind both rules)
A mean row whose term sits at a floor or a ceiling cannot tell a difference from the limit of
the scale: every seed of a configuration collapsed, or every seed (the base) at pass@1 ≤ FLOOR
or ≥ 1 − FLOOR on the evaluation set. Its verdict is `at floor`, with the reason, never
reproduced or contradicted, and it is not in the family; nor is a `too few survivors` row, nor a
rate row that no split of its collapses could decide (`degenerate`, Tarone's rule). Every other
row with a p-value is in the run's family: Holm-corrected (klrl.analysis.family), decided at 5%
family-wise.
A claim whose cells a grid lacks is one row "not in this grid"; a row without a p-value (one
seed and nothing to pool) is "inconclusive". Cells are identified by their resolved settings
(train/settings.json; klrl.analysis.tables.cell_tags).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from klrl.analysis.claim_family import NOT_IN_GRID
from klrl.analysis.claims import CLAIMS, Claim, Term
from klrl.analysis.contrasts import SeedPool, Variance, contrast
from klrl.analysis.family import seeds_for_equivalence
from klrl.analysis.rate_tests import RateRow
from klrl.analysis.outcomes import below_collapse

FLOOR = 0.02  # pass@1 at or below this (at or above 1 − this) is at the floor (ceiling)
MIN_SURVIVORS = 3  # a mean row needs this many seeds that did not collapse in each collapsing configuration

COLUMNS = (
    "claim",
    "paper",
    "comparison",
    "model",
    "task",
    "domain",
    "beta",
    "lag",
    "test",
    "seeds",
    "collapsed",
    "effect",
    "ci_level",
    "ci_lo",
    "ci_hi",
    "p",
    "verdict",
    "reason",
    "seeds_for_power",
)


@dataclass(frozen=True)
class TermScores:
    """One term of a contrast as evaluated: its per-seed per-problem pass@1 and which seeds collapsed."""

    weight: float
    label: str
    scores: np.ndarray  # seeds × problems (the base: 1 × problems)
    collapsed: np.ndarray  # bool per seed
    fixed: bool = False  # the base model: deterministic, no seed variance

    def floor_reason(self) -> str:
        """Why this term sits at a floor or ceiling ('' when it does not)."""
        if not self.fixed and self.collapsed.all():
            return f"every seed of {self.label} collapsed ({len(self.collapsed)})"
        means = self.scores[~self.collapsed].mean(1)
        for bound, word, at in ((FLOOR, "floor", means <= FLOOR), (1 - FLOOR, "ceiling", means >= 1 - FLOOR)):
            if at.all():
                return f"{self.label} at the {word}: pass@1 {'≤' if word == 'floor' else '≥'} {bound:g} in every seed"
        return ""

    def variance(self) -> Variance:
        """The base: none; a configuration with collapsed seeds: its survivors' own; else pooled."""
        if self.fixed:
            return Variance.FIXED
        return Variance.OWN if self.collapsed.any() else Variance.POOLED

    def too_few_reason(self) -> str:
        """Why this term's survivors are too few to compare ('' when they are enough)."""
        survivors = int((~self.collapsed).sum())
        if self.fixed or not self.collapsed.any() or survivors >= MIN_SURVIVORS:
            return ""
        return f"{self.label}: {survivors} of {len(self.collapsed)} seeds did not collapse (fewer than {MIN_SURVIVORS})"


def tested_row(claim: Claim, terms: list[TermScores], pool: SeedPool) -> dict:
    """One row of a claim, described: its effect, interval and raw p of presence (one-sided, the
    claim's side; "≈": TOST), and under "_test" the row's test (a mean contrast, a rate row) that
    the claim's own test combines (klrl.analysis.claim_family); or the floor or too-few-survivors
    reason that leaves the row out of it."""
    seeds = [len(t.collapsed) for t in terms if not t.fixed]
    counts = [int(t.collapsed.sum()) for t in terms if not t.fixed]
    row = {
        "test": "exact" if claim.test == "rate" else "t",
        "seeds": "/".join(map(str, seeds)),
        "collapsed": "/".join(map(str, counts)),
        "reason": "",
        "verdict": "descriptive",
    }
    if claim.test == "rate":
        tested = RateRow(((counts[0], seeds[0], counts[1], seeds[1]),))
        lo, hi = tested.interval(0.95)
        reason = "; ".join(f"{t.label} collapsed in {c} of {n} seeds" for t, c, n in zip(terms, counts, seeds))
        row |= {"effect": tested.effect, "ci_level": 0.95, "ci_lo": lo, "ci_hi": hi}
        return row | {"p": claim.side.p_present(tested), "reason": reason, "_test": tested}
    floors = [reason for t in terms if (reason := t.floor_reason())]
    if floors:
        return row | {"verdict": "at floor", "reason": "; ".join(floors)}
    few = [reason for t in terms if (reason := t.too_few_reason())]
    if few:
        return row | {"verdict": "too few survivors", "reason": "; ".join(few)}
    tested = contrast([(t.weight, t.scores[~t.collapsed], t.variance()) for t in terms], pool)
    level = 0.90 if claim.direction == "equivalent" else 0.95
    lo, hi = tested.interval(level)
    row |= {"effect": tested.effect, "ci_level": level, "ci_lo": lo, "ci_hi": hi, "p": claim.side.p_present(tested)}
    if claim.direction == "equivalent":
        row["seeds_for_power"] = seeds_for_equivalence(tested.se, min(seeds), claim.margin)
    excluded = [f"{t.label}: {c} collapsed seeds left out" for t, c in zip(terms, counts) if c]
    return row | {"reason": "; ".join(excluded), "_test": tested}


class ScoreIndex:
    """Per model and evaluation task, every configuration's per-seed per-problem pass@1, and
    which of its seeds collapsed (a property of the cell, judged in domain)."""

    def __init__(self, results) -> None:
        self.results = results
        self.configs: dict[tuple, dict[tuple, dict[int, pd.Series]]] = {}  # (model, task) → config → seed → scores
        self.collapsed: dict[tuple, dict[int, bool]] = {}  # (model, config) → seed → collapsed
        self.in_domain: dict[str, str] = {}  # model → training task
        for cell, tags in results.cells.items():  # the cell's resolved settings (klrl.analysis.tables.cell_tags)
            key = (tags["kl"], tags["beta"], tags["policy"], tags["lag"])
            model, task_in = tags["model"], results.training_task(cell)
            self.in_domain.setdefault(model, task_in)
            for task in results.evaluation(cell)["tasks"]:
                scores = results.per_problem(cell, task)
                if scores is not None:
                    self.configs.setdefault((model, task), {}).setdefault(key, {})[tags["seed"]] = scores
            own, base = results.per_problem(cell, task_in), results.base_per_problem(model, task_in)
            below = own is not None and base is not None and below_collapse(own.mean(), base.reindex(own.index).mean())
            self.collapsed.setdefault((model, key), {})[tags["seed"]] = (
                results.status(cell)["status"] == "diverged" or below
            )

    def term(self, model: str, task: str | None, key: tuple, weight: float, label: str) -> TermScores | None:
        """A configuration's scores on `task`; task None: only which seeds collapsed (a rate
        claim needs no scores: a diverged cell that was never evaluated still counts)."""
        if task is None:
            flags = self.collapsed.get((model, key))
            return (
                None
                if not flags
                else TermScores(weight, label, np.empty((len(flags), 0)), np.array([flags[s] for s in sorted(flags)]))
            )
        seeds = self.configs[(model, task)].get(key)
        if not seeds:
            return None
        flags = self.collapsed[(model, key)]
        return TermScores(weight, label, _matrix(seeds), np.array([flags[seed] for seed in sorted(seeds)]))

    def pool(self, model: str, task: str) -> SeedPool:
        """Pooled over the seeds that did not collapse, configuration by configuration."""
        survivors = []
        for key, seeds in self.configs[(model, task)].items():
            flags = np.array([self.collapsed[(model, key)][seed] for seed in sorted(seeds)])
            survivors.append(_matrix(seeds)[~flags])
        return SeedPool.from_matrices(survivors)

    def base(self, model: str, task: str) -> pd.Series | None:
        return self.results.base_per_problem(model, task)


def _matrix(seeds: dict[int, pd.Series]) -> np.ndarray:
    frames = [seeds[seed] for seed in sorted(seeds)]
    problems = frames[0].index
    if any(not frame.index.equals(problems) for frame in frames):
        raise ValueError("the seeds of one configuration were evaluated on different problems")
    return np.stack([frame.to_numpy() for frame in frames])


def _values(claim: Claim, configs, axis: str) -> tuple[list, str]:
    """The β (or lag) values common to the claim's configurations (or, for a growth claim, each
    step between neighbouring values), and how terms pick them."""
    position = {"beta": 1, "lag": 3}[axis]
    relevant = [
        t
        for t in claim.terms
        if t.kl not in ("base",)
        and not (axis == "beta" and t.kl == "none")
        and not (axis == "lag" and t.policy == "on")
    ]
    if not relevant:
        return [None], "each"
    common = set.intersection(
        *[{key[position] for key in configs if key[0] == t.kl and key[2] == t.policy} for t in relevant]
    )
    mode = "steps" if any(getattr(t, axis) != "each" for t in relevant) else "each"
    if mode == "steps":
        values = sorted(common)
        return list(zip(values, values[1:])), mode
    return sorted(common), mode


def row_keys(claim: Claim, configs) -> list[tuple[object, object, list]]:
    """The claim's rows over `configs` (configurations (kl, β, policy, lag)): per β (and lag)
    value or step, that β, lag and each term's configuration (None: the base)."""
    betas, beta_mode = _values(claim, configs, "beta")
    lags, lag_mode = _values(claim, configs, "lag")
    return [
        (beta, lag, [None if t.kl == "base" else _key(t, beta, lag, beta_mode, lag_mode) for t in claim.terms])
        for beta, lag in itertools.product(betas, lags)
    ]


def _key(term: Term, beta, lag, beta_mode: str, lag_mode: str) -> tuple:
    def pick(value, mode: str, end: str):
        return value if mode == "each" else value[0 if end == "low" else 1]

    b = 0.0 if term.kl == "none" else pick(beta, beta_mode, term.beta)
    g = 0 if term.policy == "on" else pick(lag, lag_mode, term.lag)
    return (term.kl, b, term.policy, g)


def _terms(claim: Claim, index: ScoreIndex, model: str, task: str, keys: list) -> list[TermScores] | None:
    """The claim's terms on one evaluation set, or None when a configuration (or the base) is missing."""
    scores_of = None if claim.test == "rate" else task
    terms = [
        None if term.kl == "base" else index.term(model, scores_of, key, term.weight, term.label())
        for term, key in zip(claim.terms, keys)
    ]
    cells = [t for t in terms if t is not None]
    if len(cells) < sum(term.kl != "base" for term in claim.terms):
        return None
    if claim.test == "rate":
        return terms
    problems = next(iter(index.configs[(model, task)][next(k for k in keys if k)].values())).index
    for position, term in enumerate(claim.terms):
        if term.kl == "base":
            base = index.base(model, task)
            if base is None:
                return None
            if not set(problems) <= set(base.index):
                raise ValueError(f"{model} base: its {task} evaluation lacks problems the cells have")
            terms[position] = TermScores(
                term.weight, "base", base.loc[problems].to_numpy()[None, :], np.zeros(1, bool), fixed=True
            )
    return terms


def claim_rows(results) -> list[dict]:
    """One row per claim × model × evaluation task of its domain × β (and lag) choice, decided as one family."""
    index = ScoreIndex(results)
    rows = []
    for claim in CLAIMS:
        found = False
        for model, task in index.configs:
            if (claim.domain == "in") != (index.in_domain.get(model) == task):
                continue
            configs = (
                index.configs[(model, task)]
                if claim.test == "mean"
                else [key for m, key in index.collapsed if m == model]
            )
            for beta, lag, keys in row_keys(claim, configs):
                terms = _terms(claim, index, model, task, keys)
                if terms is None:
                    continue
                found = True
                rows.append(
                    {
                        "claim": claim.name,
                        "paper": claim.paper,
                        "comparison": claim.comparison(),
                        "model": model,
                        "task": task,
                        "domain": claim.domain,
                        "beta": describe(beta),
                        "lag": describe(lag),
                    }
                    | tested_row(claim, terms, index.pool(model, task))
                )
        if not found:
            rows.append(
                {
                    "claim": claim.name,
                    "paper": claim.paper,
                    "comparison": claim.comparison(),
                    "domain": claim.domain,
                    "verdict": NOT_IN_GRID,
                }
            )
    return [dict.fromkeys(COLUMNS, np.nan) | row for row in rows]


VARIANCE_COLUMNS = (
    "model",
    "task",
    "domain",
    "configurations",
    "seeds",
    "collapsed",
    "problems",
    "seed_sd",
    "seed_df",
    "residual_sd",
)


def variance_rows(results) -> list[dict]:
    """Per model and evaluation task, the variances the claims' intervals pool (klrl.analysis.contrasts.SeedPool,
    over the seeds that did not collapse): the seed-to-seed SD of a configuration's mean pass@1 and
    the seed × problem residual SD, with the counts behind them. `klrl power seeds --seed-sd
    <seed_sd>` sizes the seeds from them; `klrl power collapse --tables` fits its simulation to them."""
    index = ScoreIndex(results)
    rows = []
    for (model, task), configs in sorted(index.configs.items()):
        pool = index.pool(model, task)
        sizes = [len(next(iter(seeds.values()))) for seeds in configs.values()]
        collapsed = sum(index.collapsed[(model, key)][seed] for key, seeds in configs.items() for seed in seeds)
        rows.append(
            {
                "model": model,
                "task": task,
                "domain": "in" if index.in_domain.get(model) == task else "out",
                "configurations": len(configs),
                "seeds": sum(len(seeds) for seeds in configs.values()),
                "collapsed": int(collapsed),
                "problems": max(sizes),
                "seed_sd": float(np.sqrt(pool.seed_var)),
                "seed_df": pool.seed_df,
                "residual_sd": float(np.sqrt(pool.residual_var)),
            }
        )
    return rows


def describe(value) -> str:
    if value is None:
        return ""
    if isinstance(value, tuple):
        return f"{value[0]:g}→{value[1]:g}"
    return f"{value:g}"
