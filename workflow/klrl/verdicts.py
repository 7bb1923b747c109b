"""The paper's claims as declared comparisons between cells, and their verdicts from the data.

Each claim (PAPER.md, "Which configuration gives which gradient" and "Off-policy") is a contrast
Σ w · pass@1 between configurations, on the in-domain or the out-of-domain evaluation sets, with
a direction: `greater` / `less` than 0, or `equivalent` within ±margin. The contrast and its
t interval come from klrl.contrasts (paired across problems, seeds pooled per evaluation set).

Verdicts, at 5% error rates:
    greater      reproduced: 95% interval above 0; contradicted: below 0; else inconclusive
    less         the mirror image
    equivalent   reproduced: the 90% interval inside (−margin, margin) (TOST, two one-sided 5%
                 tests); contradicted: the 95% interval wholly outside [−margin, margin]
A claim whose cells a grid lacks is one row "not in this grid"; an interval that cannot be
computed (one seed and nothing to pool) is "inconclusive". Cells are identified by their
resolved settings (train/settings.json: model, kl, beta, async_lag, seed; klrl.aggregate.cell_tags).

β and lag in a term: `each` gives one row per value common to every term's configuration;
`low` / `high` give one row per step between neighbouring such values, its lower and its higher
end (a claim about growth with β or with lag is tested at each step of the axis, not from end to
end: where both configurations have collapsed at the far end, a growth at an earlier step shows).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from klrl.contrasts import SeedPool, contrast

EQUIVALENCE_MARGIN = 0.03  # pass@1: "≈" means within ±0.03


@dataclass(frozen=True)
class Term:
    weight: float
    kl: str  # a KL configuration, or "base" (the base model, no seeds)
    policy: str = "on"
    beta: str = "each"  # each | low | high (ignored for none and base)
    lag: str = "each"  # each | low | high (off-policy only)

    def label(self) -> str:
        if self.kl == "base":
            return "base"
        beta = "" if self.kl == "none" or self.beta == "each" else f"@β{self.beta}"
        lag = "" if self.policy == "on" or self.lag == "each" else f"@lag{self.lag}"
        return f"{self.kl}({self.policy}){beta}{lag}"


@dataclass(frozen=True)
class Claim:
    name: str
    paper: str  # the paper's statement
    terms: tuple[Term, ...]
    domain: str  # in | out
    direction: str  # greater | less | equivalent
    margin: float = 0.0

    def comparison(self) -> str:
        text = " ".join(f"{'−' if t.weight < 0 else '+'} {t.label()}" for t in self.terms).removeprefix("+ ")
        return text + {"greater": " > 0", "less": " < 0", "equivalent": f" within ±{self.margin:g}"}[self.direction]


def _pair(a: str, b: str, policy: str = "on") -> tuple[Term, Term]:
    return Term(1, a, policy), Term(-1, b, policy)


def _growth(kl: str, control: str, axis: str, policy: str) -> tuple[Term, ...]:
    """(kl at high − kl at low) − (control at high − control at low) along β or lag."""
    def term(weight: float, name: str, end: str) -> Term:
        return Term(weight, name, policy, **{axis: end})
    return term(1, kl, "high"), term(-1, kl, "low"), term(-1, control, "high"), term(1, control, "low")


CLAIMS = (
    Claim("k1-loss-worsens-with-beta", "K1 in the loss is unstable, worse as β grows (beyond what any penalty costs)",
          _growth("k1-loss", "k1-reward", "beta", "on"), "in", "less"),
    Claim("k3-reward-collapses", "K3 in the reward collapses at every β", (Term(1, "k3-reward"), Term(-1, "base")), "in", "less"),
    Claim("k1-reward-beats-k3-loss-in", "K1 in the reward ≥ K3 in the loss, in domain", _pair("k1-reward", "k3-loss"), "in", "greater"),
    Claim("k1-reward-beats-k3-loss-out", "K1 in the reward ≥ K3 in the loss, out of domain", _pair("k1-reward", "k3-loss"), "out", "greater"),
    Claim("k3-both-matches-k1-reward", "K3 in both ≈ K1 in the reward", _pair("k3-both", "k1-reward"), "in", "equivalent", EQUIVALENCE_MARGIN),
    Claim("k1-both-matches-k1-reward", "K1 in both ≈ K1 in the reward", _pair("k1-both", "k1-reward"), "in", "equivalent", EQUIVALENCE_MARGIN),
    Claim("kl-stabilises-off-policy", "off-policy, K1 in the reward beats no KL (no KL collapses)", _pair("k1-reward", "none", "off"), "in", "greater"),
    Claim("k3-loss-stabilises-off-policy", "off-policy, K3 in the loss beats no KL", _pair("k3-loss", "none", "off"), "in", "greater"),
    Claim("k1-loss-collapses-off-policy", "off-policy, K1 in the loss falls behind K1 in the reward", _pair("k1-loss", "k1-reward", "off"), "in", "less"),
    Claim("k1-reward-ahead-off-policy", "off-policy, K1 in the reward slightly ahead of K3 in the loss", _pair("k1-reward", "k3-loss", "off"), "in", "greater"),
    Claim("k1-loss-degrades-with-lag", "off-policy biased K1 in the loss degrades as the lag grows (beyond K1 in the reward)",
          _growth("k1-loss", "k1-reward", "lag", "off"), "in", "less"),
)

COLUMNS = ("claim", "paper", "comparison", "model", "task", "domain", "beta", "lag", "seeds", "effect",
           "ci_level", "ci_lo", "ci_hi", "p", "verdict")


def verdict(claim: Claim, effect_se_df) -> dict:
    """effect, interval, p-value and verdict of one evaluated contrast (a klrl.contrasts.Contrast)."""
    c = effect_se_df
    if claim.direction == "equivalent":
        lo, hi = c.interval(0.90)
        wide_lo, wide_hi = c.interval(0.95)
        p = max(c.p_above(-claim.margin), c.p_below(claim.margin))
        reproduced = -claim.margin < lo and hi < claim.margin
        contradicted = wide_lo > claim.margin or wide_hi < -claim.margin
        level = 0.90
    else:
        lo, hi = c.interval(0.95)
        sign = 1 if claim.direction == "greater" else -1
        p = c.p_above(0.0) if sign > 0 else c.p_below(0.0)
        reproduced, contradicted = (lo > 0, hi < 0) if sign > 0 else (hi < 0, lo > 0)
        level = 0.95
    label = "reproduced" if reproduced else "contradicted" if contradicted else "inconclusive"
    return {"effect": c.effect, "ci_level": level, "ci_lo": lo, "ci_hi": hi, "p": p, "verdict": label}


class ScoreIndex:
    """Per model and evaluation task, every configuration's per-seed per-problem pass@1."""

    def __init__(self, results) -> None:
        self.results = results
        self.configs: dict[tuple, dict[tuple, dict[int, pd.Series]]] = {}  # (model, task) → config → seed → scores
        self.in_domain: dict[str, str] = {}  # model → training task
        for cell, tags in results.cells.items():  # the cell's resolved settings (klrl.aggregate.cell_tags)
            key = (tags["kl"], tags["beta"], tags["policy"], tags["lag"])
            self.in_domain.setdefault(tags["model"], results.training_task(cell))
            for task in results.evaluation(cell)["tasks"]:
                scores = results.per_problem(cell, task)
                if scores is not None:
                    self.configs.setdefault((tags["model"], task), {}).setdefault(key, {})[tags["seed"]] = scores

    def pool(self, model: str, task: str) -> SeedPool:
        return SeedPool.from_matrices([_matrix(seeds) for seeds in self.configs[(model, task)].values()])

    def base(self, model: str, task: str) -> pd.Series | None:
        return self.results.base_per_problem(model, task)


def _matrix(seeds: dict[int, pd.Series]) -> np.ndarray:
    frames = [seeds[seed] for seed in sorted(seeds)]
    problems = frames[0].index
    if any(not frame.index.equals(problems) for frame in frames):
        raise ValueError("the seeds of one configuration were evaluated on different problems")
    return np.stack([frame.to_numpy() for frame in frames])


def _values(claim: Claim, configs: dict, axis: str) -> tuple[list, str]:
    """The β (or lag) values common to the claim's configurations (or, for a growth claim, each
    step between neighbouring values), and how terms pick them."""
    position = {"beta": 1, "lag": 3}[axis]
    relevant = [t for t in claim.terms if t.kl not in ("base",) and not (axis == "beta" and t.kl == "none")
                and not (axis == "lag" and t.policy == "on")]
    if not relevant:
        return [None], "each"
    common = set.intersection(*[{key[position] for key in configs if key[0] == t.kl and key[2] == t.policy} for t in relevant])
    mode = "steps" if any(getattr(t, axis) != "each" for t in relevant) else "each"
    if mode == "steps":
        values = sorted(common)
        return list(zip(values, values[1:])), mode
    return sorted(common), mode


def _key(term: Term, beta, lag, beta_mode: str, lag_mode: str) -> tuple:
    def pick(value, mode: str, end: str):
        return value if mode == "each" else value[0 if end == "low" else 1]
    b = 0.0 if term.kl == "none" else pick(beta, beta_mode, term.beta)
    g = 0 if term.policy == "on" else pick(lag, lag_mode, term.lag)
    return (term.kl, b, term.policy, g)


def claim_rows(results) -> list[dict]:
    """One row per claim × model × evaluation task of its domain × β (and lag) choice."""
    index = ScoreIndex(results)
    rows = []
    for claim in CLAIMS:
        found = False
        for model, task in index.configs:
            in_domain = index.in_domain.get(model) == task
            if (claim.domain == "in") != in_domain:
                continue
            configs = index.configs[(model, task)]
            betas, beta_mode = _values(claim, configs, "beta")
            lags, lag_mode = _values(claim, configs, "lag")
            for beta, lag in itertools.product(betas, lags):
                terms, seeds = [], []
                for term in claim.terms:
                    if term.kl == "base":
                        base = index.base(model, task)
                        terms.append((term.weight, base, True) if base is not None else None)
                        continue
                    scores = configs.get(_key(term, beta, lag, beta_mode, lag_mode))
                    terms.append((term.weight, scores, False) if scores else None)
                    seeds.append(len(scores) if scores else 0)
                if any(t is None for t in terms):
                    continue
                found = True
                problems = next(series for _, series, fixed in terms if not fixed)
                problems = next(iter(problems.values())).index
                matrices = []
                for weight, data, fixed in terms:
                    if fixed:
                        if not set(problems) <= set(data.index):
                            raise ValueError(f"{model} base: its {task} evaluation lacks problems the cells have")
                        matrices.append((weight, data.loc[problems].to_numpy()[None, :], True))
                    else:
                        matrices.append((weight, _matrix({s: v.reindex(problems) for s, v in data.items()}), False))
                tested = contrast(matrices, index.pool(model, task))
                rows.append({"claim": claim.name, "paper": claim.paper, "comparison": claim.comparison(), "model": model,
                             "task": task, "domain": claim.domain, "beta": _describe(beta), "lag": _describe(lag),
                             "seeds": "/".join(map(str, seeds))} | verdict(claim, tested))
        if not found:
            rows.append({"claim": claim.name, "paper": claim.paper, "comparison": claim.comparison(), "domain": claim.domain,
                         "verdict": "not in this grid"})
    return [dict.fromkeys(COLUMNS, np.nan) | row for row in rows]


VARIANCE_COLUMNS = ("model", "task", "domain", "configurations", "seeds", "problems", "seed_sd", "seed_df", "residual_sd")


def variance_rows(results) -> list[dict]:
    """Per model and evaluation task, the variances the claims' intervals pool (klrl.contrasts.SeedPool):
    the seed-to-seed SD of a configuration's mean pass@1 and the seed × problem residual SD, with
    the counts behind them. `klrl power seeds --seed-sd <seed_sd>` sizes the seeds from them."""
    index = ScoreIndex(results)
    rows = []
    for (model, task), configs in sorted(index.configs.items()):
        pool = index.pool(model, task)
        sizes = [len(next(iter(seeds.values()))) for seeds in configs.values()]
        rows.append({"model": model, "task": task, "domain": "in" if index.in_domain.get(model) == task else "out",
                     "configurations": len(configs), "seeds": sum(len(seeds) for seeds in configs.values()),
                     "problems": max(sizes), "seed_sd": float(np.sqrt(pool.seed_var)), "seed_df": pool.seed_df,
                     "residual_sd": float(np.sqrt(pool.residual_var))})
    return rows


def _describe(value) -> str:
    if value is None:
        return ""
    if isinstance(value, tuple):
        return f"{value[0]:g}→{value[1]:g}"
    return f"{value:g}"
