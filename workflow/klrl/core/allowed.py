"""The values a setting admits beyond its type, declared once, on the dataclass field.

A settings dataclass declares each field with `setting(help, default, allowed=Allowed(...))`.
The same declaration is checked when the dataclass is built (`first_refused`) and written into
the workflow's JSON schema (`Allowed.keywords`, through klrl.grid.config_schema), so a bound or a
list of choices has one home.

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Knobs:
    ...     steps: int = setting("training steps", 1, allowed=Allowed(minimum=1))
    ...     clip: float | None = setting("clip c (None: off)", None, allowed=Allowed(exclusive_minimum=0))
    ...     schedule: str = setting("how lr moves", "constant", allowed=Allowed(choices=("constant", "cosine")))
    >>> first_refused(Knobs()), first_refused(Knobs(steps=0)), first_refused(Knobs(clip=0.0))
    (None, 'steps', 'clip')
    >>> first_refused(Knobs(schedule="linear")), Allowed(exclusive_minimum=0, maximum=1).keywords()
    ('schedule', {'exclusiveMinimum': 0, 'maximum': 1})
    >>> Allowed(exclusive_minimum=0, maximum=1).describe()
    '> 0, ≤ 1'
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Allowed:
    """A range (any of its four ends) or a list of choices. None is always admitted: whether a
    field may be None is its type's business. A tuple's or a list's items, and a mapping's values,
    are each held to the bounds or choices."""

    minimum: float | None = None
    exclusive_minimum: float | None = None
    maximum: float | None = None
    exclusive_maximum: float | None = None
    choices: tuple = ()

    def admits(self, value) -> bool:
        if value is None:
            return True
        if isinstance(value, (tuple, list)):
            return all(self.admits(item) for item in value)
        if isinstance(value, dict):
            return all(self.admits(item) for item in value.values())
        if self.choices:
            return value in self.choices
        return (
            (self.minimum is None or value >= self.minimum)
            and (self.exclusive_minimum is None or value > self.exclusive_minimum)
            and (self.maximum is None or value <= self.maximum)
            and (self.exclusive_maximum is None or value < self.exclusive_maximum)
        )

    def describe(self) -> str:
        """The bounds in words, for an error message: '≥ 0', '> 0, ≤ 1', 'one of a, b'."""
        if self.choices:
            return "one of " + ", ".join(map(str, self.choices))
        return bounds_in_words(self.keywords())

    def keywords(self) -> dict:
        """The JSON-schema keywords of the bounds (`enum` for choices is the schema writer's, as
        it depends on whether the field may be None)."""
        ends = {
            "minimum": self.minimum,
            "exclusiveMinimum": self.exclusive_minimum,
            "maximum": self.maximum,
            "exclusiveMaximum": self.exclusive_maximum,
        }
        return {keyword: value for keyword, value in ends.items() if value is not None}


SIGNS = {"minimum": "≥", "exclusiveMinimum": ">", "maximum": "≤", "exclusiveMaximum": "<"}


def bounds_in_words(node: dict) -> str:
    """The JSON-schema bounds of `node` (an Allowed's keywords, or a schema node) in words:
    '≥ 1', '> 0, ≤ 1'; '' when it has none."""
    return ", ".join(f"{sign} {node[keyword]}" for keyword, sign in SIGNS.items() if keyword in node)


def setting(help: str, default=dataclasses.MISSING, factory=dataclasses.MISSING, allowed: Allowed | None = None):
    """A dataclass field with its meaning (`help`) and, optionally, the values it admits."""
    metadata = {"help": help} | ({"allowed": allowed} if allowed else {})
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def first_refused(instance) -> str | None:
    """The name of the first field (in declaration order) whose value its `Allowed` refuses."""
    return first_refused_value(
        type(instance), {f.name: getattr(instance, f.name) for f in dataclasses.fields(instance)}
    )


def first_refused_value(settings_class, values: dict) -> str | None:
    """The first of `values` (field name → value, in their order) that its field's `Allowed`
    in the dataclass `settings_class` refuses, before any instance exists."""
    for name, value in values.items():
        allowed = settings_class.__dataclass_fields__[name].metadata.get("allowed")
        if allowed and not allowed.admits(value):
            return name
    return None
