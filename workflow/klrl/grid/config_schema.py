"""The generated part of the workflow's schema: the enums of KL configurations and tasks, from
the registries; the `train` section, from TrainConfig's fields (type, help, declared bounds);
and the keys of a model's entry, each built model's recipe from its settings dataclass.

workflow/schemas/config.schema.yaml is hand-written above the marker line and generated below
it; `python -m klrl config-docs` rewrites the generated part (and config/README.md from the
whole). A new TrainConfig field, bound, estimator, task or built model so reaches the schema, the docs and
`klrl train --help` with no second edit; klrl.grid.config_check stops the workflow, naming the first
difference, when the file is behind the code.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing

from klrl.grid.expansion import GRID_KEYS
from klrl.models.builds import BUILT_MODELS
from klrl.objective.estimators import STANDARD_CONFIGS
from klrl.objective.kl_config import KL_OPTIONS, KLConfig
from klrl.tasks import TASKS
from klrl.training.config import TrainConfig

MARKER = "  # Generated below by `python -m klrl config-docs` (klrl.grid.config_schema) from the registries and TrainConfig; do not edit."
_JSON_TYPES = {int: "integer", float: "number", bool: "boolean", str: "string"}
# The keys of any model's entry under `models` (klrl.models.get_base_model reads the first three;
# klrl.grid.expansion the jobs); a built model's recipe key joins them.
DECLARED_MODEL_KEYS = {
    "hub": {
        "type": "string",
        "minLength": 1,
        "description": "Hugging Face Hub id (downloaded by the jobs) or a local model folder",
    },
    "revision": {
        "type": "string",
        "minLength": 1,
        "description": "Hub revision: a branch, tag or commit (default: the main branch)",
    },
    "stop_tokens": {
        "type": "array",
        "items": {"type": "string", "minLength": 1},
        "description": "tokens that end the model's turn besides its EOS, its generation config's and its chat template's",
    },
    "jobs": {"$ref": "#/$defs/jobs", "description": "resources of this model's jobs, over the top-level `jobs`"},
}


def _optional(hint) -> tuple[object, bool]:
    """The hint without None, and whether None was allowed."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return args[0], len(args) < len(typing.get_args(hint))
    return hint, False


def field_schema(cls, f: dataclasses.Field) -> dict:
    """The JSON schema of one settings field: its type, its declared bounds or choices, its help."""
    hint, nullable = _optional(typing.get_type_hints(cls)[f.name])
    allowed = f.metadata.get("allowed")
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (list, dict):
        if allowed and allowed.choices:
            item = {"enum": list(allowed.choices)}
        else:
            item = {"type": _JSON_TYPES[args[-1]]} | (allowed.keywords() if allowed else {})
        if origin is list:
            out = {"type": "array", "items": item}
        else:
            out = {"type": "object", "additionalProperties": item | {"description": f"one entry of {f.name}"}}
    elif allowed and allowed.choices:
        out = {"enum": [None, *allowed.choices] if nullable else list(allowed.choices)}
    elif origin is tuple:
        (item,) = set(args)
        size = len(args)
        out = {"type": "array", "minItems": size, "maxItems": size}
        out["items"] = {"type": _JSON_TYPES[item]} | (allowed.keywords() if allowed else {})
    else:
        kind = _JSON_TYPES[hint]
        out = {"type": [kind, "null"] if nullable else kind} | (allowed.keywords() if allowed else {})
    return out | {"description": f.metadata["help"]}


def train_schema() -> dict:
    """$defs.train: every TrainConfig field a config sets (the grid sets GRID_KEYS per cell)."""
    kl_fields = {f.name: f for f in dataclasses.fields(KLConfig)}
    properties = {}
    for f in dataclasses.fields(TrainConfig):
        if f.name == "kl":
            options = {name: field_schema(KLConfig, kl_fields[name]) for name in KL_OPTIONS}
            properties["kl"] = {
                "type": "object",
                "additionalProperties": False,
                "description": f.metadata["help"],
                "properties": options,
            }
        elif f.name not in GRID_KEYS:
            properties[f.name] = field_schema(TrainConfig, f)
    return {"type": "object", "additionalProperties": False, "properties": properties}


def settings_schema(cls, description: str) -> dict:
    """An object of a settings dataclass's fields, none required, no other key."""
    properties = {f.name: field_schema(cls, f) for f in dataclasses.fields(cls)}
    return {"type": "object", "description": description, "additionalProperties": False, "properties": properties}


def model_schema() -> dict:
    """$defs.model_settings: the keys of one model's entry under `models`, each built model's
    recipe key with its settings among them (klrl.models.builds)."""
    properties = dict(DECLARED_MODEL_KEYS)
    for model in BUILT_MODELS.values():
        if model.build in properties:
            raise ValueError(f"{model.name}'s recipe key {model.build!r} is another model's: give it its own")
        properties[model.build] = settings_schema(
            model.recipe.settings,
            f"{model.name}'s recipe (klrl {model.verb} options): built once per recipe into results/bases/{model.name}-<hash>/",
        )
    return {
        "type": "object",
        "description": "one base model's settings",
        "additionalProperties": False,
        "properties": properties,
    }


def generated_defs() -> dict:
    return {
        "kl": {"enum": list(STANDARD_CONFIGS)},
        "task": {"enum": list(TASKS)},
        "train": train_schema(),
        "model_settings": model_schema(),
    }


def _yaml(name: str, node: dict, indent: int) -> list[str]:
    """`name:` and `node` as block YAML, one property per line as a JSON (flow) mapping."""
    pad = " " * indent
    if "properties" not in node:
        return [f"{pad}{name}: {json.dumps(node, ensure_ascii=False)}"]
    lines = [f"{pad}{name}:"]
    for key, value in node.items():
        if key == "properties":
            lines.append(f"{pad}  properties:")
            for child, child_node in value.items():
                lines += _yaml(child, child_node, indent + 4)
        else:
            lines.append(f"{pad}  {key}: {json.dumps(value, ensure_ascii=False)}")
    return lines


def render(text: str, source: str) -> str:
    """The schema's text (read from `source`) with its generated part, below MARKER, written
    from the code."""
    head, found, _ = text.partition(MARKER + "\n")
    if not found:
        raise ValueError(f"{source}: no line {MARKER.strip()!r} to generate below")
    body = [line for name, node in generated_defs().items() for line in _yaml(name, node, 2)]
    return head + MARKER + "\n" + "\n".join(body) + "\n"
