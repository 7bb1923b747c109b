"""Settings dataclasses typed at the boundary: every value checked against its field's annotation.

Settings cross process boundaries as JSON or YAML written by a serializer (the grid writes one
file per cell) and are read back here: a value of the wrong type is an error naming the field
and the type it needs, never a string that YAML guessed (`1e-06` is text to YAML 1.1) or a
float where an integer belongs. Integers are accepted for float fields and become floats; a
float is never accepted for an integer field. `key=value` text from a command line is parsed
by the field's type (`parse_text`), not by YAML's guessing.

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Knobs:
    ...     lr: float = 0.1
    ...     steps: int = 1
    ...     clip: float | None = None
    >>> check_fields(Knobs(lr=1, steps=3), "knobs")
    Knobs(lr=1.0, steps=3, clip=None)
    >>> check_fields(Knobs(lr="1e-06"), "knobs")
    Traceback (most recent call last):
    ...
    ValueError: knobs.lr: '1e-06' is a str; it must be a number
    >>> check_fields(Knobs(steps=2.5), "knobs")
    Traceback (most recent call last):
    ...
    ValueError: knobs.steps: 2.5 is a float; it must be an integer
    >>> parse_text(float | None, "1e-06", "lr"), parse_text(int, "3", "steps"), parse_text(float | None, "null", "clip")
    (1e-06, 3, None)
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing

_TYPE_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
_PLURALS = {bool: "true or false values", int: "integers", float: "numbers", str: "strings"}


def _describe(hint) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("null" if arg is type(None) else _describe(arg) for arg in args)
    if (origin is tuple and args[-1] is Ellipsis) or origin is list:
        return f"a list of {_PLURALS.get(args[0], _describe(args[0]))}"
    if origin is tuple:
        return f"a list of {len(args)} ({', '.join(_describe(arg) for arg in args)})"
    if origin is dict:
        return f"a mapping of names to {_PLURALS.get(args[1], _describe(args[1]))}"
    if dataclasses.is_dataclass(hint):
        return f"a mapping of {hint.__name__} settings"
    return _TYPE_NAMES.get(hint, getattr(hint, "__name__", str(hint)))


def coerce(value, hint, where: str):
    """`value` as the type `hint` names (int → float where a float is wanted), or a ValueError."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arg in (a for a in args if a is not type(None)):
            try:
                return coerce(value, arg, where)
            except ValueError:
                continue
        raise ValueError(f"{where}: {value!r} is a {type(value).__name__}; it must be {_describe(hint)}")
    if origin is tuple and args[-1] is Ellipsis:
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{where}: {value!r} must be {_describe(hint)}")
        return tuple(coerce(item, args[0], f"{where}[{i}]") for i, item in enumerate(value))
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise ValueError(f"{where}: {value!r} must be {_describe(hint)}")
        return tuple(coerce(item, arg, f"{where}[{i}]") for i, (item, arg) in enumerate(zip(value, args)))
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{where}: {value!r} must be {_describe(hint)}")
        return [coerce(item, args[0], f"{where}[{i}]") for i, item in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
            raise ValueError(f"{where}: {value!r} must be {_describe(hint)}")
        return {key: coerce(item, args[1], f"{where}.{key}") for key, item in value.items()}
    if dataclasses.is_dataclass(hint):
        if isinstance(value, hint):
            return value
        if isinstance(value, dict) and hasattr(hint, "from_settings"):
            return hint.from_settings(value, where)
        raise ValueError(f"{where}: {value!r} must be {_describe(hint)}")
    if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ValueError(f"{where}: {value!r} must be a finite number")
        return float(value)
    if hint in (int, str, bool) and isinstance(value, hint) and (hint is bool or not isinstance(value, bool)):
        return value
    raise ValueError(f"{where}: {value!r} is a {type(value).__name__}; it must be {_describe(hint)}")


def check_fields(instance, owner: str):
    """Check (and coerce in place) every field of a dataclass instance against its annotation."""
    hints = typing.get_type_hints(type(instance))
    for f in dataclasses.fields(instance):
        value = coerce(getattr(instance, f.name), hints[f.name], f"{owner}.{f.name}")
        object.__setattr__(instance, f.name, value)  # frozen dataclasses too
    return instance


def from_mapping(cls, values: dict, owner: str):
    """An instance of the dataclass `cls` from a mapping: unknown and missing keys are errors
    naming them (with the field's help text), and each value is checked by `cls` itself."""
    if not isinstance(values, dict):
        raise ValueError(f"{owner}: must be a mapping of keys to values, got {type(values).__name__}")
    fields = dataclasses.fields(cls)
    known = {f.name for f in fields}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"{owner}: unknown key {unknown[0]!r}; known keys: {', '.join(sorted(known))}")
    required = [f for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    missing = [f for f in required if f.name not in values]
    if missing:
        help_text = missing[0].metadata.get("help", "")
        raise ValueError(f"{owner}: missing required key {missing[0].name!r} ({help_text})")
    return cls(**values)


def field_hint(cls, name: str):
    """The resolved annotation of field `name` of dataclass `cls`."""
    return typing.get_type_hints(cls)[name]


def parse_text(hint, raw: str, where: str):
    """A command-line value parsed by the type its field needs.

    >>> parse_text(tuple[float, float], "0.9,0.99", "adam_betas")
    (0.9, 0.99)
    >>> parse_text(bool, "yes", "flag")
    Traceback (most recent call last):
    ...
    ValueError: flag: 'yes' must be true or false
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if raw.lower() in ("null", "none") and type(None) in args:
            return None
        (inner,) = [arg for arg in args if arg is not type(None)]
        return parse_text(inner, raw, where)
    if origin is tuple and args[-1] is Ellipsis:
        return tuple(
            parse_text(args[0], part.strip(), f"{where}[{i}]") for i, part in enumerate(raw.split(",")) if part.strip()
        )
    if origin is tuple:
        parts = raw.split(",")
        if len(parts) != len(args):
            raise ValueError(f"{where}: {raw!r} must be {len(args)} comma-separated values")
        return tuple(parse_text(arg, part.strip(), f"{where}[{i}]") for i, (arg, part) in enumerate(zip(args, parts)))
    try:
        if hint is bool:
            return {"true": True, "false": False}[raw.lower()]
        if hint is int:
            return int(raw)
        if hint is float:
            return coerce(float(raw), float, where)
    except (KeyError, ValueError):
        raise ValueError(f"{where}: {raw!r} must be {_describe(hint)}") from None
    if hint is str:
        return raw
    raise ValueError(f"{where}: a {_describe(hint)} cannot be given as text; use a settings file")
