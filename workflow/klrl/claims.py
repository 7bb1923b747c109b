"""`klrl describe`: the table of what each KL configuration's expected gradient is."""

from __future__ import annotations

import argparse

from klrl.kl import STANDARD_NAMES, KLConfig, claims_markdown


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", nargs="*", default=list(STANDARD_NAMES), help="configurations")


def run(args: argparse.Namespace) -> None:
    for name in args.names:
        KLConfig.from_name(name, beta=0.0 if name == "none" else 1.0)  # a clear error for a bad name
    print(claims_markdown(tuple(args.names)), end="")
