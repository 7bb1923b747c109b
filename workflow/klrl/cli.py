"""`python -m klrl <verb> ...`: one verb per pipeline step, each in its own module.

A verb's module defines `add_arguments(parser)` and `run(args)`; it is imported only when
its verb runs, so `--help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

VERBS = {
    "describe": ("klrl.claims", "print what each KL configuration's expected gradient is"),
    "toy-bias": ("klrl.toy.bias", "exact gradient bias and Monte Carlo variance on a tabular policy"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m klrl", description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    modules = {}
    chosen = sys.argv[1:] if argv is None else argv
    for verb, (module_name, help_text) in VERBS.items():
        sub = verbs.add_parser(verb, help=help_text, description=help_text)
        if verb in chosen:
            modules[verb] = importlib.import_module(module_name)
            modules[verb].add_arguments(sub)
    args = parser.parse_args(argv)
    modules[args.verb].run(args)
    return 0
