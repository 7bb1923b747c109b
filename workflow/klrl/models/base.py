"""What a base model is: built here by code from a recipe (`Recipe`), or named by a Hub id or a
local folder in a config (`BaseModel` carries either)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable


@dataclass(frozen=True)
class Recipe:
    """How a model built here is made.

    `settings` is a dataclass whose fields (declared with `klrl.core.allowed.setting`) are the
    recipe's settings: a config's `models.<name>.<key>` sets them, the build verb takes each as
    an option, the workflow's schema is generated from them, and the recipe's hash covers
    `hashed(settings)` (every field, unless the model says otherwise) with `version`. `make`
    writes the model folder from a settings instance and returns the line the verb prints.
    """

    settings: type
    version: int  # bump whenever the build's code changes what a recipe makes
    make: Callable[[Path, Any], str]
    summary: str  # the build verb's one-line help
    hashed: Callable[[Any], dict] = dataclasses.asdict


@dataclass(frozen=True)
class BaseModel:
    name: str
    build: str  # a built model's recipe key in a config (models.<name>.<build>), or "hub"
    hub_id: str | None = None
    revision: str | None = None
    stop_tokens: tuple[str, ...] = ()
    verb: str | None = None  # the `python -m klrl` verb that builds it (a built model)
    recipe: Recipe | None = None  # how it is built (a built model)


def recipe_digest(model: str, version: int, settings: dict) -> str:
    """12 hex digits of the sha256 of a resolved recipe (the model, its build version and the
    settings its hash covers), as canonical JSON: the <hash> of results/bases/<model>-<hash>."""
    resolved = {"model": model, "build_version": version, "settings": settings}
    text = json.dumps(resolved, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]
