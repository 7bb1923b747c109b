"""`python -m klrl <verb> ...`: one verb per pipeline step.

The verbs are the modules of klrl.verbs, registered in VERBS below: each has HELP, `add_arguments`
(its options) and `run` (the step), and imports the library it drives only inside them, so that
`--help` and every other verb stay fast. Each model built here adds the build verb its
declaration names (klrl.models.builds, run by klrl.verbs.build). A user's mistake (a ValueError
or an OSError: a bad value, a missing or unreadable file, a locked cell) is one line on stderr and
exit status 2; `--debug` (anywhere on the command line) shows the traceback instead.
"""

from __future__ import annotations

import argparse
import sys

from klrl.models.builds import BUILT_MODELS
from klrl.verbs import (
    aggregate,
    audit,
    budget,
    build,
    cells,
    config_docs,
    describe,
    evaluate,
    fetch,
    gpu_lease,
    plan,
    power,
    prepare_data,
    readme_results,
    toy_bias,
    track_files,
    track_grid,
    track_reconcile,
    tracking_load,
    tracking_server,
    train,
    ui,
    ui_screenshots,
)

VERBS = {
    "describe": describe,
    "toy-bias": toy_bias,
    "audit": audit,
    "prepare-data": prepare_data,
    "train": train,
    "evaluate": evaluate,
    "gpu-lease": gpu_lease,
    "track-grid": track_grid,
    "track-reconcile": track_reconcile,
    "track-files": track_files,
    "plan": plan,
    "tracking-server": tracking_server,
    "tracking-load": tracking_load,
    "aggregate": aggregate,
    "cells": cells,
    "budget": budget,
    "fetch": fetch,
    "power": power,
    "readme-results": readme_results,
    "config-docs": config_docs,
    "ui": ui,
    "ui-screenshots": ui_screenshots,
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
    ends = argv.index("--") if "--" in argv else len(argv)  # after --: another command's words (gpu-lease)
    debug = "--debug" in argv[:ends]
    head = [arg for arg in argv[:ends] if arg != "--debug"]
    chosen = next((arg for arg in head if not arg.startswith("-")), None)  # the verb
    argv = head + argv[ends:]
    parser = argparse.ArgumentParser(
        prog="python -m klrl", description=__doc__.splitlines()[0], formatter_class=HelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (anywhere on the line)")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for name, verb in VERBS.items():
        sub = verbs.add_parser(name, help=verb.HELP, description=verb.HELP, formatter_class=HelpFormatter)
        if name == chosen:  # a verb's options are declared only when it runs: they import its library
            verb.add_arguments(sub)
            sub.set_defaults(run=verb.run)
    for model in BUILT_MODELS.values():  # each model built here has the build verb its declaration names
        name, summary = model.verb, model.recipe.summary
        sub = verbs.add_parser(name, help=summary, description=summary, formatter_class=HelpFormatter)
        if name == chosen:
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
