"""`klrl audit`: the audit table (and CSV) of every installed library's KL settings, and the README's block.

The README block `<!-- audit:begin -->` … `<!-- audit:end -->` is this command's table and the
one-line reasons for the libraries without an adapter, under the line naming the command.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "another RL library's own KL code on the tabular policy: its exact gradient bias"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, help="CSV to write (one row per library setting and mode)")
    parser.add_argument("--readme", type=Path, help="README whose audit block to rewrite")
    parser.add_argument("--seed", type=int, default=0, help="seed of the toy problem (πθ, πref, μ)")
    parser.add_argument("--vocab", type=int, default=3, help="vocabulary size V")
    parser.add_argument("--horizon", type=int, default=4, help="sequence length T")


def run(args: argparse.Namespace) -> None:
    from klrl.audit.gradients import COLUMNS, audit_rows
    from klrl.audit.libraries import installed_settings
    from klrl.audit.report import markdown, readme_block
    from klrl.reports.readme_blocks import rewrite
    from klrl.toy.bias import write_csv

    rows = audit_rows(installed_settings(), args.vocab, args.horizon, args.seed)
    print(markdown(rows), end="")
    if args.out:
        write_csv(rows, args.out, COLUMNS)
        print(f"wrote {len(rows)} rows to {args.out}")
    if args.readme:
        args.readme.write_text(rewrite(args.readme.read_text(), readme_block(rows)))
        print(f"{args.readme}: audit block rewritten")
