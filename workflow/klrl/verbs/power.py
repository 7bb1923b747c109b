"""`klrl power`: by simulation (klrl.analysis.power_study), the coverage of the claims' interval,
the seeds a claim needs, or the collapse scenario's rates, fitted to a run or given."""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

HELP = "coverage of the claims' interval and the seeds a claim needs, by simulation"


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
    parser.add_argument(
        "--survivor-sd",
        type=float,
        default=1.0,
        help="collapse: seed SD of a collapsing configuration's survivors, as a multiple of the others'",
    )
    parser.add_argument("--write", type=Path, help="collapse: rewrite this file's power:collapse block with the table")


def run(args: argparse.Namespace) -> None:
    from klrl.analysis.power_study import collapse_table, coverage, seeds_needed
    from klrl.analysis.simulation import Scenario

    if args.configs < 2 or args.grids < 1:
        raise SystemExit(f"--configs {args.configs} must be ≥ 2 and --grids {args.grids} ≥ 1")
    if args.what == "collapse":
        given = dict(base_rate=args.base_rate, seed_sd=args.seed_sd[0], seeds=args.seeds[0], problems=args.problems[0])
        table = collapse_table(args.tables, args.collapse, given, args.grids, args.random_seed, args.survivor_sd)
        print(table)
        if args.write:
            from klrl.reports.readme_blocks import marked_block, rewrite

            args.write.write_text(rewrite(args.write.read_text(), marked_block("power:collapse", [table])))
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
