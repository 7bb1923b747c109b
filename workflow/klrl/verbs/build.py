"""The build verb of each model built here (`klrl pretrain-base`, `klrl convert-base`: the verb
a model's declaration in klrl.models.builds names), writing a model folder from the recipe
settings given as options. The workflow's rule build_base runs it (workflow/rules/models.smk)
with the options klrl.models.recipe.build_arguments spells out."""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from pathlib import Path

from klrl.models.builds import BUILT_MODELS
from klrl.models.recipe import recipe_settings
from klrl.core.typed import parse_text


def add_arguments(parser: argparse.ArgumentParser, model: str) -> None:
    """--out, --threads, and one option per recipe setting of `model`, with its help and default."""
    settings_class = BUILT_MODELS[model].recipe.settings
    parser.add_argument("--out", type=Path, required=True, help="model folder to write")
    parser.add_argument(
        "--threads", type=int, help="torch CPU threads (the weights do not depend on it: docs/components.md)"
    )
    hints = typing.get_type_hints(settings_class)
    for spec in dataclasses.fields(settings_class):
        default = spec.default if spec.default is not dataclasses.MISSING else spec.default_factory()
        text = f"{spec.metadata['help']} (default: {json.dumps(default)})".replace("%", "%%")
        flag = f"--{spec.name.replace('_', '-')}"
        origin = typing.get_origin(hints[spec.name])
        if origin is list:
            parser.add_argument(flag, nargs="+", help=text)
        else:
            parser.add_argument(flag, help=text.replace("(default", "(JSON; default") if origin is dict else text)
    parser.set_defaults(model=model)


def _parsed(raw, hint, name: str):
    """An option's text as its setting's type: a list as given, a mapping as JSON."""
    origin = typing.get_origin(hint)
    if origin is list:
        return raw
    if origin is dict:
        try:
            return json.loads(raw)
        except json.JSONDecodeError as error:
            raise ValueError(f"{name}: {raw!r} is not JSON ({error.msg})") from None
    return parse_text(hint, raw, name)


def run(args: argparse.Namespace) -> None:
    model = BUILT_MODELS[args.model]
    hints = typing.get_type_hints(model.recipe.settings)
    given = {
        name: _parsed(getattr(args, name), hint, name)
        for name, hint in hints.items()
        if getattr(args, name) is not None
    }
    settings = recipe_settings(model.name, given, where="")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    print(model.recipe.make(args.out, settings))
