"""`klrl readme-results` (`make readme-results`): the README's generated blocks of one experiment
(claims, tables) rewritten from a finished run's tables (klrl.reports.readme_blocks)."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "rewrite the README's results block from the claims table"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tables", type=Path, required=True, help="folder with claims.csv (results/<experiment>/tables)"
    )
    parser.add_argument(
        "--experiment", required=True, help="whose README blocks to rewrite (claims:EXPERIMENT, table:EXPERIMENT:NAME)"
    )
    parser.add_argument("--readme", type=Path, default=Path("README.md"))
    parser.add_argument("--config", required=True, help="the config the run used, e.g. config/study.yaml")
    parser.add_argument("--run-time", required=True, help="the run's wall time, e.g. '2 h 41 min on 2 cores'")
    parser.add_argument(
        "--commit", help="the commit the run used, for tables whose cells record none (default: git rev-parse HEAD)"
    )
    parser.add_argument(
        "--contrast",
        type=Path,
        help="another run's tables (results/<experiment>/tables): rewrite the contrast:EXPERIMENT block with a "
        "sentence per claim whose verdict differs between the two",
    )


def run(args: argparse.Namespace) -> None:
    from klrl.reports.readme_blocks import rewrite_readme

    tables = rewrite_readme(
        args.readme, args.tables, args.experiment, args.config, args.run_time, args.commit, args.contrast
    )
    contrast = f", and the contrast with {args.contrast}" if args.contrast else ""
    print(f"{args.readme}: claims block and {tables} table block(s) rewritten from {args.tables}{contrast}")
