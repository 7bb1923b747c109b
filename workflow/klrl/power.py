"""`klrl power`: coverage of the claims' interval and the seeds a claim needs, by simulation.

Each runs the claims' tests on synthetic grids (klrl.simulation) whose truth is known:
    coverage   how often the 95% interval of a two-configuration difference holds the true
               difference, over seed SDs and seed counts (and one configuration with a wider SD)
    seeds      per seed SD × problems × samples per problem, the fewest seeds per configuration
               that give `--power` (default 80%) of calling a `greater` claim reproduced when the
               true difference is `--effect` (default 0.05 pass@1)
    collapse   grids whose configurations collapse with a probability (bimodal seeds), fitted
               from a run's tables (`--tables`) or given (`--collapse`): the family-wise rate of
               false decisive rows, a bimodal configuration's mean and rate rows, the rule the
               claims table replaced, coverage and power of a planted difference
               (klrl.family_simulation); `--write FILE` puts the table in FILE's
               `<!-- power:collapse:begin -->` … `end` block
Each synthetic grid of coverage and seeds has `--configs` configurations (the seed variance is
pooled over them, as in a real grid's evaluation set); their seed SDs are inputs.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools

import numpy as np

from pathlib import Path

from klrl.contrasts import SeedPool, contrast
from klrl.family import REACHABLE_SEEDS
from klrl.simulation import Scenario, simulate_grid


def _differences(scenario: Scenario, effect: float, configs: int, grids: int, seed: int, first_sd: float | None = None):
    rng = np.random.default_rng(seed)
    seed_sds = None if first_sd is None else [first_sd] + [scenario.seed_sd] * (configs - 1)
    for _ in range(grids):
        grid = simulate_grid(scenario, [effect] + [0.0] * (configs - 1), rng, seed_sds=seed_sds)
        yield contrast([(1.0, grid[0], False), (-1.0, grid[1], False)], SeedPool.from_matrices(grid))


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

    low, high = 1, 2
    while not enough(high):
        if high >= max_seeds:
            return None
        low, high = high, min(2 * high, max_seeds)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", choices=("coverage", "seeds", "collapse"), help="which table to print")
    parser.add_argument("--seed-sd", type=float, nargs="+", default=[0.03, 0.06, 0.1, 0.15], help="seed SDs of pass@1")
    parser.add_argument("--seeds", type=int, nargs="+", default=[2, 3, 5], help="seeds per configuration (coverage)")
    parser.add_argument("--problems", type=int, nargs="+", default=[150, 500], help="evaluation problems (seeds)")
    parser.add_argument("--samples", type=int, nargs="+", default=[4], help="samples per problem (seeds)")
    parser.add_argument("--effect", type=float, default=0.05, help="true difference in pass@1")
    parser.add_argument("--power", type=float, default=0.8, help="target power (seeds)")
    parser.add_argument("--base-rate", type=float, default=0.6, help="pass@1 of the configuration without effect")
    parser.add_argument("--configs", type=int, default=8, help="configurations sharing the seed-variance pool")
    parser.add_argument("--grids", type=int, default=400, help="synthetic grids per estimate")
    parser.add_argument("--random-seed", type=int, default=0)
    parser.add_argument(
        "--tables", type=Path, help="collapse: fit the scenario to a run's tables (results/<experiment>/tables)"
    )
    parser.add_argument(
        "--collapse",
        type=float,
        nargs="+",
        help="collapse: each configuration's collapse probability (without --tables)",
    )
    parser.add_argument("--write", type=Path, help="collapse: rewrite this file's power:collapse block with the table")


def collapse_table(args: argparse.Namespace) -> str:
    """The `collapse` table (Markdown), headed by the scenario and the command that gives it."""
    from klrl.family_simulation import collapse_report, fit_collapse

    if args.tables:
        scenario, collapse = fit_collapse(args.tables)
        source = f"fitted to `{args.tables}`"
    elif args.collapse and len(args.collapse) >= 2:
        scenario = Scenario(
            base_rate=args.base_rate, seed_sd=args.seed_sd[0], seeds=args.seeds[0], problems=args.problems[0]
        )
        collapse, source = args.collapse, "given"
    else:
        raise ValueError("power collapse: give --tables (a run's tables) or --collapse with at least two probabilities")
    lines = [
        f"Generated by `python -m klrl power collapse` ({source}, {args.grids} grids, random seed {args.random_seed}): "
        f"{len(collapse)} configurations, collapse probabilities {', '.join(f'{q:.2g}' for q in collapse)}; "
        f"{scenario.seeds} seeds, seed SD {scenario.seed_sd:.3g} (seeds that did not collapse), base pass@1 "
        f"{scenario.base_rate:.2f}, {scenario.problems} problems.",
        "",
        "| what | rate |",
        "|---|---|",
    ]
    lines += [
        f"| {what} | {value:.3f} |" for what, value in collapse_report(scenario, collapse, args.grids, args.random_seed)
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> None:
    if args.configs < 2 or args.grids < 1:
        raise SystemExit(f"--configs {args.configs} must be ≥ 2 and --grids {args.grids} ≥ 1")
    if args.what == "collapse":
        table = collapse_table(args)
        print(table)
        if args.write:
            from klrl.readme_results import rewrite

            block = "\n".join(["<!-- power:collapse:begin -->", table, "<!-- power:collapse:end -->"])
            args.write.write_text(rewrite(args.write.read_text(), block))
        return
    if args.what == "coverage":
        print(
            f"coverage of the 95% interval, true difference {args.effect}, {args.grids} grids of {args.configs} configurations"
        )
        print("| seed SD | seed SD of the first config | seeds | coverage |\n|---|---|---|---|")
        for sd, n in itertools.product(args.seed_sd, args.seeds):
            for first in dict.fromkeys((sd, max(args.seed_sd))):
                scenario = Scenario(base_rate=args.base_rate, seed_sd=sd, seeds=n)
                print(
                    f"| {sd:g} | {first:g} | {n} | {coverage(scenario, args.effect, args.configs, args.grids, args.random_seed, first):.3f} |"
                )
        return
    print(
        f"seeds per configuration for {args.power:.0%} power at a true difference of {args.effect} "
        f"(one-sided 2.5%), {args.grids} grids of {args.configs} configurations"
    )
    print("| seed SD | problems | samples | seeds |\n|---|---|---|---|")
    for sd, problems, samples in itertools.product(args.seed_sd, args.problems, args.samples):
        scenario = Scenario(base_rate=args.base_rate, seed_sd=sd, problems=problems, samples=samples)
        n = seeds_needed(scenario, args.effect, args.power, args.configs, args.grids, args.random_seed)
        print(f"| {sd:g} | {problems} | {samples} | {n if n else '> 32'} |", flush=True)
