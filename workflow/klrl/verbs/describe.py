"""`klrl describe`: what each KL configuration's expected gradient is, on- and off-policy
(`klrl.objective.gradient_claims`); the table of docs/audit.md is this verb's output. With `--config FILE`
it lists that grid's biased settings instead (`klrl.grid.biased_settings`, what Snakemake prints when it
loads the config)."""

from __future__ import annotations

import argparse
from pathlib import Path


HELP = "print what each KL configuration's expected gradient is"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", nargs="*", help="configurations (default: every standard one)")
    parser.add_argument(
        "--config",
        type=Path,
        help="a workflow config: list its biased KL settings instead, as Snakemake does when it loads it",
    )


def run(args: argparse.Namespace) -> None:
    from klrl.objective.gradient_claims import claims_markdown
    from klrl.objective.kl_config import KLConfig

    if args.config:
        from klrl.core.files import read_yaml
        from klrl.grid.expansion import expand_grid
        from klrl.grid.biased_settings import report

        if args.names:
            raise ValueError("give configuration names or --config, not both")
        print(report(expand_grid(read_yaml(args.config))), end="")
        return
    for name in args.names:
        KLConfig.from_name(name, beta=0.0 if name == "none" else 1.0)  # a clear error for a bad name
    print(claims_markdown(args.names or None), end="")
