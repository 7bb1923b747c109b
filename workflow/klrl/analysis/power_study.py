"""The simulations behind `klrl power`: coverage of the claims' interval and the seeds a claim needs.

Each runs the claims' tests on synthetic grids (klrl.analysis.simulation) whose truth is known:
    coverage   how often the 95% interval of a two-configuration difference holds the true
               difference, over seed SDs and seed counts (and one configuration with a wider SD)
    seeds      per seed SD × problems × samples per problem, the fewest seeds per configuration
               that give `--power` (default 80%) of calling a `greater` claim reproduced when the
               true difference is `--effect` (default 0.05 pass@1)
    collapse   grids whose configurations collapse with a probability (bimodal seeds), fitted
               from a run's tables (`--tables`) or given (`--collapse`): the family-wise rate of
               false decisive rows, a bimodal configuration's mean and rate rows, the rule the
               claims table replaced, few-survivor rows (survivors spread `--survivor-sd` × the
               others' seed SD), coverage and power of a planted difference inside the family
               (klrl.analysis.family_simulation)
    rates      a rate row's power inside its family, exactly (no simulation): for two
               configurations' collapse probabilities and a number of seeds each, the chance
               that Fisher's two-sided p falls below ALPHA / rows (Holm's first step, which
               decides the row whatever the family's other p-values: a lower bound on its
               power) with the estimate on the true difference's side
`--write FILE` puts any of the four tables in FILE's `<!-- power:WHAT:begin -->` … `end` block.
Each synthetic grid of coverage and seeds has `--configs` configurations (the seed variance is
pooled over them, as in a real grid's evaluation set); their seed SDs are inputs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from scipy import stats as scipy_stats

from klrl.analysis.contrasts import SeedPool, Variance, contrast
from klrl.analysis.claim_family import ALPHA
from klrl.analysis.family import REACHABLE_SEEDS, fisher_p
from klrl.analysis.simulation import Scenario, simulate_grid


def _differences(scenario: Scenario, effect: float, configs: int, grids: int, seed: int, first_sd: float | None = None):
    rng = np.random.default_rng(seed)
    seed_sds = None if first_sd is None else [first_sd] + [scenario.seed_sd] * (configs - 1)
    for _ in range(grids):
        grid = simulate_grid(scenario, [effect] + [0.0] * (configs - 1), rng, seed_sds=seed_sds)
        yield contrast(
            [(1.0, grid[0], Variance.POOLED), (-1.0, grid[1], Variance.POOLED)], SeedPool.from_matrices(grid)
        )


def coverage(
    scenario: Scenario,
    effect: float = 0.05,
    configs: int = 8,
    grids: int = 400,
    seed: int = 0,
    first_sd: float | None = None,
) -> float:
    """Fraction of grids whose 95% interval of (config 0 − config 1) holds the true `effect`."""
    hits = 0
    for tested in _differences(scenario, effect, configs, grids, seed, first_sd):
        lo, hi = tested.interval(0.95)
        hits += lo <= effect <= hi
    return hits / grids


def power(scenario: Scenario, effect: float = 0.05, configs: int = 8, grids: int = 400, seed: int = 0) -> float:
    """Fraction of grids in which a `greater` claim of a true `effect` is called reproduced."""
    return float(
        np.mean([tested.interval(0.95)[0] > 0 for tested in _differences(scenario, effect, configs, grids, seed)])
    )


def seeds_needed(
    scenario: Scenario,
    effect: float = 0.05,
    target: float = 0.8,
    configs: int = 8,
    grids: int = 400,
    seed: int = 0,
    max_seeds: int = REACHABLE_SEEDS,
) -> int | None:
    """The fewest seeds per configuration with power ≥ target (None: more than max_seeds).
    Doubling then bisection: power grows with the number of seeds."""

    def enough(n: int) -> bool:
        return power(dataclasses.replace(scenario, seeds=n), effect, configs, grids, seed) >= target

    return fewest_seeds(enough, max_seeds)


def fewest_seeds(enough, max_seeds: int) -> int | None:
    """The fewest seeds n ≥ 2 with `enough(n)`, which holds from some n on (None: not by
    max_seeds). Doubling then bisection."""
    low, high = 1, 2
    while not enough(high):
        if high >= max_seeds:
            return None
        low, high = high, min(2 * high, max_seeds)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high


def collapse_table(
    tables: Path | None,
    collapse: list[float] | None,
    given: dict,
    grids: int,
    random_seed: int,
    survivor_sd: float = 1.0,
) -> str:
    """The `collapse` table (Markdown), headed by the scenario and the command that gives it: the
    scenario and collapse probabilities fitted to a run's `tables`, else the `collapse`
    probabilities (at least two) on the Scenario of the `given` settings; the survivors of a
    collapsing configuration spread `survivor_sd` × the scenario's seed SD."""
    from klrl.analysis.family_simulation import collapse_report, fit_collapse

    if tables:
        scenario, collapse = fit_collapse(tables)
        source = f"fitted to `{tables}`"
    elif collapse and len(collapse) >= 2:
        scenario, source = Scenario(**given), "given"
    else:
        raise ValueError("power collapse: give --tables (a run's tables) or --collapse with at least two probabilities")
    lines = [
        f"Generated by `python -m klrl power collapse` ({source}, {grids} grids, random seed {random_seed}): "
        f"{len(collapse)} configurations, collapse probabilities {', '.join(f'{q:.2g}' for q in collapse)}; "
        f"{scenario.seeds} seeds, seed SD {scenario.seed_sd:.3g} (seeds that did not collapse), pass@1 without "
        f"effect {scenario.base_rate:.2f}, {scenario.problems} problems; survivors of a collapsing configuration spread "
        f"{survivor_sd:g} × that SD.",
        "",
        "| what | rate |",
        "|---|---|",
    ]
    lines += [
        f"| {what} | {value:.3f} |"
        for what, value in collapse_report(scenario, collapse, grids, random_seed, survivor_sd=survivor_sd)
    ]
    return "\n".join(lines)


def rate_row_power(rates: tuple[float, float], seeds: int, rows: int, alpha: float = ALPHA) -> float:
    """The exact chance, over both configurations' collapse counts (Binomial(seeds, rate) each),
    that a rate row is decisive at Holm's first step in a family of `rows` rows (p < alpha / rows)
    with its estimate on the side of the true difference (0 when the rates are equal)."""
    side = np.sign(rates[0] - rates[1])
    counts = np.arange(seeds + 1)
    first, second = (scipy_stats.binom.pmf(counts, seeds, rate) for rate in rates)
    return float(
        sum(
            first[a] * second[b]
            for a in counts
            for b in counts
            if np.sign(a - b) == side != 0 and fisher_p(a, b, (seeds, seeds)) < alpha / rows
        )
    )


def rates_table(pairs: list[tuple[float, float]], seeds: list[int], rows: int) -> str:
    """The `rates` table (Markdown): each pair of collapse probabilities' power at each seed count."""
    lines = [
        f"Generated by `python -m klrl power rates` (exact, no simulation): the chance that a rate row is "
        f"decisive on the true difference's side, Fisher's exact two-sided p below {ALPHA:g} / {rows} (Holm's "
        f"first step in a family of {rows} rows), each configuration collapsing independently in each seed.",
        "",
        "| collapse probabilities | " + " | ".join(f"{n} seeds" for n in seeds) + " |",
        "|---|" + "---|" * len(seeds),
    ]
    for pair in pairs:
        powers = " | ".join(f"{rate_row_power(pair, n, rows):.2f}" for n in seeds)
        lines.append(f"| {pair[0]:g} against {pair[1]:g} | {powers} |")
    return "\n".join(lines)
