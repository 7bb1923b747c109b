"""`klrl config-docs`: the schema's generated part and config/README.md written from the code
(klrl.reports.config_reference); with --check, exit status 1 naming each file that is behind it."""

from __future__ import annotations

import argparse
import sys

HELP = "write the config schema's generated part and config/README.md from the code (--check: compare)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true", help="compare instead of writing")


def run(args: argparse.Namespace) -> None:
    from klrl.reports.config_reference import generated_files

    generated = generated_files()
    if args.check:
        stale = [path for path, text in generated.items() if path.read_text() != text]
        for path in stale:
            print(f"{path} is out of date: run `python -m klrl config-docs`", file=sys.stderr)
        if stale:
            raise SystemExit(1)
        return
    for path, text in generated.items():
        path.write_text(text)
        print(f"wrote {path}")
