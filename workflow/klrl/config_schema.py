"""The generated part of the workflow's schema: the enums of KL configurations and tasks, from
the registries, and the `train` section, from TrainConfig's fields (type, help, declared bounds).

workflow/schemas/config.schema.yaml is hand-written above the marker line and generated below
it; `python -m klrl.config_docs` rewrites the generated part (and config/README.md from the
whole). A new TrainConfig field, bound, estimator or task so reaches the schema, the docs and
`klrl train --help` with no second edit; klrl.config_check stops the workflow, naming the first
difference, when the file is behind the code.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing

from klrl.grid import GRID_KEYS
from klrl.objective.estimators import STANDARD_CONFIGS
from klrl.objective.kl_config import KL_OPTIONS, KLConfig
from klrl.tasks import TASKS
from klrl.training.config import TrainConfig

MARKER = "  # Generated below by `python -m klrl.config_docs` (klrl.config_schema) from the registries and TrainConfig; do not edit."
_JSON_TYPES = {int: "integer", float: "number", bool: "boolean", str: "string"}


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
    if allowed and allowed.choices:
        out = {"enum": [None, *allowed.choices] if nullable else list(allowed.choices)}
    elif typing.get_origin(hint) is tuple:
        (item,) = set(typing.get_args(hint))
        size = len(typing.get_args(hint))
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


def generated_defs() -> dict:
    return {"kl": {"enum": list(STANDARD_CONFIGS)}, "task": {"enum": list(TASKS)}, "train": train_schema()}


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
