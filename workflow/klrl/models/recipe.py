"""What a base model built here is made from (its recipe), the recipe's hash, and the folder the
built model is kept in. Torch-free: the Snakefile imports it to name that folder.

A recipe is every setting its build reads, resolved (a config's `models.<name>.<key>` over the
defaults of the model's settings dataclass, klrl.models.builds: so `{}` and `{steps: <the
default>}` are one recipe), plus the version of the code that turns it into weights
(`Recipe.version`). The model is built once per recipe, into results/bases/<model>-<hash>/model,
whichever config asks for it first; every config with the same recipe reads that folder, and a
changed setting is another hash, so another folder and another build.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path

from klrl.core.allowed import first_refused_value
from klrl.models.base import recipe_digest
from klrl.models.builds import BUILT_MODELS
from klrl.core.paths import BASES
from klrl.core.typed import coerce


def recipe_settings(model: str, options: dict | None, where: str | None = None):
    """The settings dataclass of the built model `model` from its recipe options: each value
    checked against its field's type and declared bounds. Errors name the key under `where`
    (default: the config's `models.<model>.<key>`; '' for the build verb's own options)."""
    built = BUILT_MODELS[model]
    settings_class = built.recipe.settings
    where = f"models.{model}.{built.build}" if where is None else where
    prefix = f"{where}." if where else ""
    known = [spec.name for spec in dataclasses.fields(settings_class)]
    unknown = sorted(set(options or {}) - set(known))
    if unknown:
        raise ValueError(f"{where or model}: unknown key {unknown[0]!r}; known: {', '.join(known)}")
    hints = typing.get_type_hints(settings_class)
    values = {key: coerce(value, hints[key], prefix + key) for key, value in (options or {}).items()}
    if refused := first_refused_value(settings_class, values):  # each value, before the checks across fields
        allowed = settings_class.__dataclass_fields__[refused].metadata["allowed"]
        raise ValueError(f"{prefix}{refused}: {values[refused]!r} is not {allowed.describe()}")
    try:
        return settings_class(**values)
    except ValueError as error:
        raise ValueError(prefix + str(error)) from None


def recipe_hash(model: str, options: dict | None) -> str:
    """The hash of a built model's recipe from a config's options (klrl.models.base.recipe_digest)."""
    built = BUILT_MODELS[model].recipe
    return recipe_digest(model, built.version, built.hashed(recipe_settings(model, options)))


def base_folder(model: str, options: dict | None) -> Path:
    """results/bases/<model>-<hash>: the built model (model/), its build log and benchmark."""
    return BASES / f"{model}-{recipe_hash(model, options)}"


def build_arguments(model: str, options: dict | None) -> list[str]:
    """The options of the model's build verb that make its recipe: every setting that is set
    spelled out, so two configs with one recipe run the same command (klrl.verbs.build parses
    them back)."""
    arguments = []
    for key, value in dataclasses.asdict(recipe_settings(model, options)).items():
        flag = "--" + key.replace("_", "-")
        if value is None:
            continue
        if isinstance(value, list):
            arguments += [flag, *value]
        elif isinstance(value, dict):
            arguments += [flag, json.dumps(value, sort_keys=True, separators=(",", ":"))]
        else:
            arguments += [flag, str(value)]
    return arguments
