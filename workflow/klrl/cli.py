"""`python -m klrl <verb> ...`: one verb per pipeline step.

Each verb names the module that implements it, whose `add_arguments` declares the arguments
and whose `run` runs the step; the module is imported only when its verb runs, so `--help`
stays fast. Each model built here adds the build verb its declaration names
(klrl.models.builds). A user's mistake (a ValueError or an OSError: a bad value, a missing or unreadable
file, a locked cell) is one line on stderr and exit status 2; `--debug` (anywhere on the command
line) shows the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NamedTuple

from klrl.models.builds import BUILT_MODELS


class Verb(NamedTuple):
    module: str  # it has add_arguments(parser) and run(args)
    help: str


VERBS = {
    "describe": Verb("klrl.describe", "print what each KL configuration's expected gradient is"),
    "toy-bias": Verb("klrl.toy.bias", "exact gradient bias and Monte Carlo variance on a tabular policy"),
    "audit": Verb(
        "klrl.verbs.audit", "another RL library's own KL code on the tabular policy: its exact gradient bias"
    ),
    "prepare-data": Verb("klrl.tasks.data", "write a task's JSONL splits and manifest"),
    "train": Verb("klrl.verbs.train", "RL-train one cell (on- or off-policy, any KL configuration)"),
    "evaluate": Verb("klrl.verbs.evaluate", "evaluate a model on tasks through lm-evaluation-harness (pass@1)"),
    "track-grid": Verb("klrl.tracking.experiment", "create a grid's MLflow experiment and runs, once, before its jobs"),
    "track-reconcile": Verb("klrl.tracking.reconcile", "end the MLflow runs left RUNNING by jobs that ended (killed)"),
    "track-files": Verb("klrl.tracking.figures", "attach files (the figures) to a grid's MLflow run"),
    "plan": Verb("klrl.plan", "write a config's analysis plan and its hash (before the first cell trains)"),
    "tracking-server": Verb(
        "klrl.tracking.server", "an MLflow tracking server on PostgreSQL, for many concurrent jobs"
    ),
    "tracking-load": Verb(
        "klrl.tracking.load", "check a tracking store under many concurrent writer processes, every row counted"
    ),
    "aggregate": Verb("klrl.aggregate", "collect every cell's results into tables"),
    "cells": Verb("klrl.cells", "list a config's cell ids, or check that a name is one (suggesting close matches)"),
    "power": Verb("klrl.power", "coverage of the claims' interval and the seeds a claim needs, by simulation"),
    "readme-results": Verb("klrl.readme_results", "rewrite the README's results block from the claims table"),
    "ui": Verb("klrl.ui_server", "serve a config's MLflow store and print the address of its runs table"),
    "ui-screenshots": Verb(
        "klrl.ui_screenshots", "screenshots of the MLflow UI comparing cells' curves, for the README"
    ),
}


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Every option's default in --help (not for required options and unset ones); descriptions
    and epilogs (train's config keys) as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.required or action.default in (None, False, []):
            return action.help
        return super()._get_help_string(action)


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("klrl")
    except PackageNotFoundError:
        return "unknown (not installed; run from the checkout)"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv
    argv = [arg for arg in argv if arg != "--debug"]
    parser = argparse.ArgumentParser(
        prog="python -m klrl", description=__doc__.splitlines()[0], formatter_class=HelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (anywhere on the line)")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for name, verb in VERBS.items():
        sub = verbs.add_parser(name, help=verb.help, description=verb.help, formatter_class=HelpFormatter)
        if name in argv:
            module = importlib.import_module(verb.module)
            module.add_arguments(sub)
            sub.set_defaults(run=module.run)
    for model in BUILT_MODELS.values():  # each model built here has the build verb its declaration names
        name, summary = model.verb, model.recipe.summary
        sub = verbs.add_parser(name, help=summary, description=summary, formatter_class=HelpFormatter)
        if name in argv:
            from klrl.models import build

            build.add_arguments(sub, model.name)
            sub.set_defaults(run=build.run)
    args = parser.parse_args(argv)
    try:
        args.run(args)
    except (ValueError, OSError) as error:
        if debug:
            raise
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        print(f"klrl {args.verb}: error: {message} (--debug for the traceback)", file=sys.stderr)
        return 2
    return 0
