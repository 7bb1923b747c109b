"""`klrl power` (klrl.analysis.power_study): by simulation, the coverage of the claims' interval,
the seeds a claim needs, or the collapse scenario's rates, fitted to a run or given; exactly, a
collapse-rate row's power at given rates and seed counts; `plan`: each claim a study config's
grid tests, its power at the config's seeds and the seeds it needs (klrl.analysis.plan_power)."""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

HELP = "coverage of the claims' interval, the seeds a claim needs, a collapse-rate row's power"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "what", choices=("coverage", "seeds", "collapse", "rates", "mechanism", "plan"), help="which table to print"
    )
    parser.add_argument("--seed-sd", type=float, nargs="+", default=[0.03, 0.06, 0.1, 0.15], help="seed SDs of pass@1")
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[2, 3, 5], help="seeds per configuration (coverage, rates)"
    )
    parser.add_argument("--problems", type=int, nargs="+", default=[150, 500], help="evaluation problems (seeds)")
    parser.add_argument("--samples", type=int, nargs="+", default=[4], help="samples per problem (seeds)")
    parser.add_argument("--effect", type=float, default=0.05, help="true difference in pass@1")
    parser.add_argument("--power", type=float, default=0.8, help="target power (seeds)")
    parser.add_argument("--base-rate", type=float, default=0.6, help="pass@1 of the configuration without effect")
    parser.add_argument("--configs", type=int, default=8, help="configurations sharing the seed-variance pool")
    parser.add_argument("--grids", type=int, default=400, help="synthetic grids per estimate")
    parser.add_argument("--random-seed", type=int, default=0)
    parser.add_argument(
        "--tables",
        type=Path,
        help="collapse: fit the scenario to a run's tables (results/<experiment>/tables) or published tables (docs/results/<experiment>)",
    )
    parser.add_argument(
        "--collapse",
        type=float,
        nargs="+",
        help="collapse: each configuration's collapse probability (without --tables); rates: pairs of them",
    )
    parser.add_argument(
        "--survivor-sd",
        type=float,
        default=1.0,
        help="collapse: seed SD of a collapsing configuration's survivors, as a multiple of the others'",
    )
    parser.add_argument(
        "--betas", type=float, nargs="+", default=[0.1, 1.0, 3.0], help="mechanism: the planned study's β grid"
    )
    parser.add_argument("--config", type=Path, help="plan: the study's config (its grid, seeds and not_testable)")
    parser.add_argument(
        "--mechanism-sd", type=float, nargs=2, default=[0.08, 0.064], help="plan: seed SDs of the attained KL and J_β"
    )
    parser.add_argument("--rows", type=int, default=5, help="rates: rows with a p-value in the claims' family")
    parser.add_argument("--write", type=Path, help="rewrite this file's power:WHAT block with the table")


def run(args: argparse.Namespace) -> None:
    from klrl.analysis.power_study import collapse_table

    if args.configs < 2 or args.grids < 1:
        raise SystemExit(f"--configs {args.configs} must be ≥ 2 and --grids {args.grids} ≥ 1")
    if args.what == "rates":
        table = _rates(args)
    elif args.what == "plan":
        table = _plan(args)
    elif args.what == "mechanism":
        table = _mechanism(args)
    elif args.what == "collapse":
        given = dict(base_rate=args.base_rate, seed_sd=args.seed_sd[0], seeds=args.seeds[0], problems=args.problems[0])
        table = collapse_table(args.tables, args.collapse, given, args.grids, args.random_seed, args.survivor_sd)
    else:
        table = (_coverage if args.what == "coverage" else _seeds)(args)
    print(table)
    if args.write:
        from klrl.reports.readme_blocks import marked_block, rewrite

        args.write.write_text(rewrite(args.write.read_text(), marked_block(f"power:{args.what}", [table])))


def _mechanism(args: argparse.Namespace) -> str:
    """Each mechanism claim's power at its declared size in its family, at the seed SD of a
    pilot's mechanism.csv (--tables: its tables, or its published seeds.csv), per number of seeds."""
    import pandas as pd

    from klrl.analysis.mechanism_power import pooled_seed_sd, power_rows

    from klrl.analysis.published import is_published

    tables = args.tables or Path("--tables")
    path = tables / ("seeds.csv" if is_published(tables) else "mechanism.csv")
    if not path.is_file():
        raise SystemExit(
            f"{path}: no mechanism.csv (give --tables: a pilot's results/<experiment>/tables or its published tables)"
        )
    measured = pd.read_csv(path).drop_duplicates("cell").dropna(subset=["kl_reverse", "objective"])
    seed_sd = pooled_seed_sd(measured)
    rows = pd.DataFrame(power_rows(args.betas, seed_sd, args.seeds, args.grids, args.random_seed))
    table = rows.pivot(index="claim", columns="seeds", values="power").loc[rows["claim"].unique()]
    sds = ", ".join(f"{measure} {sd:.3g}" for measure, sd in seed_sd.items())
    lines = [
        f"Generated by `python -m klrl power mechanism` from `{path}`: each mechanism claim's power (share of "
        f"{args.grids} planted studies that reproduce it inside the family, random seed {args.random_seed}) with "
        f"every claim's effect at its declared size, β {', '.join(f'{b:g}' for b in args.betas)}; seed SD {sds}.",
        "",
        "| claim | " + " | ".join(f"{n} seeds" for n in table.columns) + " |",
        "|---|" + "---|" * len(table.columns),
        *(f"| {claim} | " + " | ".join(f"{v:.2f}" for v in values) + " |" for claim, values in table.iterrows()),
        "| no effect anywhere: share of studies with a false decision | "
        + " | ".join(f"{rows[rows['seeds'] == n]['null_family'].iloc[0]:.3f}" for n in table.columns)
        + " |",
    ]
    return "\n".join(lines)


def _plan(args: argparse.Namespace) -> str:
    """Each claim's power as the config at --config plans it (klrl.analysis.plan_power): pass@1
    seed SDs --seed-sd IN OUT, problems --problems IN OUT, base rate --base-rate."""
    from klrl.analysis.mechanism_claims import sizes_of
    from klrl.analysis.plan_power import Domain, Planning, plan_table
    from klrl.grid.config_check import read_config

    if args.config is None:
        raise SystemExit("power plan: give --config, --seed-sd IN OUT and --problems IN OUT")
    config = read_config(args.config)
    tasks = max(len(group["eval_tasks"]) - 1 for group in config["groups"])
    given = 2 if tasks else 1  # a grid evaluated in domain only plans no out-of-domain claim
    if len(args.seed_sd) != given or len(args.problems) != given:
        domains = "IN OUT" if tasks else "IN (its grid evaluates in domain only)"
        raise SystemExit(f"power plan: give --config, --seed-sd {domains} and --problems {domains}")
    domains = {"in": Domain(args.base_rate, args.problems[0], 1, args.seed_sd[0])}
    if tasks:
        domains["out"] = Domain(args.base_rate, args.problems[1], tasks, args.seed_sd[1])
    sds = dict(zip(("kl_reverse", "objective"), args.mechanism_sd))
    sizes = sizes_of(config.get("mechanism_sizes"))
    planning = Planning(domains, sds, sizes, args.samples[0], args.grids, args.random_seed)
    command = (
        f"python -m klrl power plan --config {args.config} --seed-sd {' '.join(f'{s:g}' for s in args.seed_sd)}"
        f" --problems {' '.join(map(str, args.problems))} --base-rate {args.base_rate:g}"
        f" --mechanism-sd {' '.join(f'{s:g}' for s in args.mechanism_sd)} --grids {args.grids}"
        f" --samples {args.samples[0]}"
    )
    return plan_table(config, planning, command)


def _coverage(args: argparse.Namespace) -> str:
    from klrl.analysis.power_study import coverage
    from klrl.analysis.simulation import Scenario

    lines = [
        f"Generated by `python -m klrl power coverage`: coverage of the 95% interval of the true difference "
        f"{args.effect}, {args.grids} grids of {args.configs} configurations (random seed {args.random_seed}), pass@1 "
        f"without effect {args.base_rate}.",
        "",
        "| seed SD | seed SD of the first config | seeds | coverage |",
        "|---|---|---|---|",
    ]
    for sd, n in itertools.product(args.seed_sd, args.seeds):
        for first in dict.fromkeys((sd, max(args.seed_sd))):
            scenario = Scenario(base_rate=args.base_rate, seed_sd=sd, seeds=n)
            value = coverage(scenario, args.effect, args.configs, args.grids, args.random_seed, first)
            lines.append(f"| {sd:g} | {first:g} | {n} | {value:.3f} |")
    return "\n".join(lines)


def _seeds(args: argparse.Namespace) -> str:
    from klrl.analysis.power_study import seeds_needed
    from klrl.analysis.simulation import Scenario

    lines = [
        f"Generated by `python -m klrl power seeds`: seeds per configuration for {args.power:.0%} power at a true "
        f"difference of {args.effect} (one row, one-sided 2.5%), {args.grids} grids of {args.configs} configurations "
        f"(random seed {args.random_seed}), pass@1 without effect {args.base_rate}.",
        "",
        "| seed SD | problems | samples | seeds |",
        "|---|---|---|---|",
    ]
    for sd, problems, samples in itertools.product(args.seed_sd, args.problems, args.samples):
        scenario = Scenario(base_rate=args.base_rate, seed_sd=sd, problems=problems, samples=samples)
        n = seeds_needed(scenario, args.effect, args.power, args.configs, args.grids, args.random_seed)
        lines.append(f"| {sd:g} | {problems} | {samples} | {n if n else '> 32'} |")
    return "\n".join(lines)


def _rates(args: argparse.Namespace) -> str:
    from klrl.analysis.power_study import rates_table

    given = args.collapse or []
    if not given or len(given) % 2 or not all(0 <= q <= 1 for q in given):
        raise SystemExit("power rates: --collapse takes pairs of collapse probabilities in [0, 1], e.g. 0.8 0.2")
    if args.rows < 1 or min(args.seeds) < 1:
        raise SystemExit(f"power rates: --rows {args.rows} and every --seeds must be ≥ 1")
    return rates_table(list(zip(given[::2], given[1::2])), args.seeds, args.rows)
