"""Synthetic grids whose truth is known: per-problem pass@1 of configurations, seeds and problems.

The generative model (the one klrl.analysis.contrasts assumes, on the logit scale):

    pass probability of config c, seed s, problem j = sigmoid(a + b_j + θ_c + u_cs + i_cj)
    observed pass@1 = Binomial(samples, that probability) / samples

with b_j ~ N(0, problem_sd²) shared by every configuration (the same evaluation problems),
u_cs ~ N(0, σ_u²) the seed effect, i_cj ~ N(0, interaction_sd²) a configuration's own
problem-specific effect. `a` is set so the population pass@1 at θ = 0 is `base_rate`; σ_u so a
configuration's seed-mean pass@1 has standard deviation `seed_sd` (to first order); θ_c so its
population pass@1 is `base_rate + effect_c`.

Collapse is bimodal: a configuration may be given a probability q_c that a seed collapses; such a
seed's pass probability is `collapsed_rate` on every problem (the pass@1 near 0 of a collapsed
run), and the seeds that do not collapse are shifted up so that the configuration's population
pass@1 is still `base_rate + effect_c` = (1 − q_c)·(survivors' rate) + q_c·collapsed_rate. The population pass@1 is computed by Gauss-Hermite
quadrature, so the true contrast of a synthetic grid is exact. Used by the tests of the claims
table and by `klrl power` (coverage and power).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit

_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(80)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


@dataclass(frozen=True)
class Scenario:
    base_rate: float = 0.6  # population pass@1 of a configuration with no effect
    seed_sd: float = 0.06  # SD of a configuration's seed-mean pass@1
    problem_sd: float = 1.5  # SD of problem difficulty (logit scale)
    interaction_sd: float = 0.3  # SD of a configuration's problem-specific effect (logit scale)
    problems: int = 150
    samples: int = 4  # samples per problem behind each per-problem pass@1
    seeds: int = 2
    collapsed_rate: float = 0.005  # pass probability of a collapsed seed, on every problem

    def __post_init__(self) -> None:
        if not 0 < self.base_rate < 1:
            raise ValueError(f"base_rate {self.base_rate} is not in (0, 1)")
        if min(self.problems, self.samples, self.seeds) < 1 or self.problems < 2:
            raise ValueError(f"problems {self.problems} ≥ 2, samples {self.samples} ≥ 1, seeds {self.seeds} ≥ 1")

    def population_rate(self, shift: float, seed_logit_sd: float | None = None) -> float:
        """E[pass probability] over problems, seeds and interactions at logit shift a + shift."""
        sd = np.sqrt(self.problem_sd**2 + self.interaction_sd**2 + (seed_logit_sd or 0.0) ** 2)
        return float(_WEIGHTS @ expit(shift + sd * _NODES))

    @cached_property
    def seed_logit_sd(self) -> float:
        """σ_u giving seed-mean SD `seed_sd`: seed_sd / (slope of the population rate), the slope
        taken where the rate is base_rate without seed effects."""
        a = brentq(lambda x: self.population_rate(x) - self.base_rate, -30, 30)
        slope = (self.population_rate(a + 1e-4) - self.population_rate(a - 1e-4)) / 2e-4
        return self.seed_sd / slope

    @cached_property
    def intercept(self) -> float:
        """a: the population pass@1 (seed effects included) is base_rate at θ = 0."""
        sigma_u = self.seed_logit_sd
        return brentq(lambda x: self.population_rate(x, sigma_u) - self.base_rate, -30, 30)

    def shift_for(self, effect: float, seed_scale: float = 1.0) -> float:
        """The logit shift θ whose population pass@1 is base_rate + effect, for a configuration
        whose seed effects spread `seed_scale` times the scenario's."""
        a, sigma_u = self.intercept, self.seed_logit_sd * seed_scale
        target = self.base_rate + effect
        if not 0 < target < 1:
            raise ValueError(f"effect {effect} puts pass@1 outside (0, 1) from base {self.base_rate}")
        return brentq(lambda theta: self.population_rate(a + theta, sigma_u) - target, -30, 30)


def survivor_effect(scenario: Scenario, effect: float, collapse: float) -> float:
    """The effect of the seeds that do not collapse, so that a configuration collapsing with
    probability `collapse` has population pass@1 base_rate + effect (0 when every seed collapses)."""
    if not 0 <= collapse <= 1:
        raise ValueError(f"collapse probability {collapse} is not in [0, 1]")
    if collapse == 1:
        return 0.0
    target = scenario.base_rate + effect
    return (target - collapse * scenario.collapsed_rate) / (1 - collapse) - scenario.base_rate


def simulate_grid(
    scenario: Scenario,
    effects: list[float],
    rng: np.random.Generator,
    seeds: list[int] | None = None,
    seed_sds: list[float] | None = None,
    collapse: list[float] | None = None,
) -> list[np.ndarray]:
    """One synthetic grid: per configuration (population pass@1 = base_rate + its effect) a
    seeds × problems matrix of observed pass@1 on one shared problem set. `seeds`, `seed_sds` and
    `collapse` give each configuration its own number of seeds, seed SD (of the seeds that do not
    collapse) and probability that a seed collapses (default: the scenario's seeds and SD, no
    collapse); whatever its seed SD, a configuration's population pass@1 is base_rate + its effect,
    so the effects are the true differences."""
    a, sigma_u = scenario.intercept, scenario.seed_logit_sd
    m = scenario.problems
    difficulty = rng.normal(0.0, scenario.problem_sd, m)
    matrices = []
    for index, effect in enumerate(effects):
        n = scenario.seeds if seeds is None else seeds[index]
        seed_scale = 1.0 if seed_sds is None else seed_sds[index] / scenario.seed_sd
        q = 0.0 if collapse is None else collapse[index]
        effect = survivor_effect(scenario, effect, q) if q else effect
        theta = scenario.shift_for(effect, seed_scale) if effect or seed_scale != 1 else 0.0
        noise = rng.normal(0.0, scenario.interaction_sd, m) + rng.normal(0.0, sigma_u * seed_scale, (n, 1))
        probability = expit(a + theta + difficulty + noise)
        if q:
            probability[rng.random(n) < q] = scenario.collapsed_rate
        matrices.append(rng.binomial(scenario.samples, probability) / scenario.samples)
    return matrices
