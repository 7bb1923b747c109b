"""Workflow config checks that fail in one line naming the key, before Snakemake builds a job.

`check_config` runs the JSON schema (workflow/schemas/config.schema.yaml) and reports the most
relevant violation as `<config file>: <where>: <what>` (a missing key, a wrong type, an unknown
key with the allowed ones, a value with the allowed ones), never the schema or the config
itself; then the checks across sections that a schema cannot express: every task a group trains
or evaluates on can be prepared from `data:` (a generated task needs its split sizes there), a
built model's recipe can be built, and the tracking URI is one MLflow can open. Before any of it,
the schema's generated part must be what the code generates (klrl.grid.config_schema: the KL
configurations and tasks of the registries, TrainConfig's fields): a name or field added to the
code and not to the schema stops the workflow, naming it. `read_config` reads a config file and checks it, for
every entry point that reads one (`klrl cells`, and through it `make run` and `make cells`); the
Snakefile checks the config Snakemake has read, before anything else.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

import yaml

from klrl.grid.config_schema import model_schema, train_schema
from klrl.core.files import read_yaml
from klrl.objective.estimators import STANDARD_CONFIGS
from klrl.tasks import TASKS, get_task

SCHEMA = Path("workflow/schemas/config.schema.yaml")  # from the checkout's root, as every path of a verb

TRACKING_SCHEMES = ("sqlite", "file", "http", "https", "postgresql", "mysql", "mssql", "databricks")


def _where(path) -> str:
    parts = ""
    for part in path:
        parts += f"[{part}]" if isinstance(part, int) else (f".{part}" if parts else str(part))
    return parts or "(top level)"


def schema_problem(config: dict, schema: dict) -> str:
    """The most relevant schema violation as one line ('' when the config is valid)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    error = best_match(Draft202012Validator(schema).iter_errors(config))
    if error is None:
        return ""
    where = _where(error.absolute_path)
    if error.validator == "additionalProperties":
        unexpected = re.findall(r"'([^']+)'", error.message.split("(")[-1])
        allowed = ", ".join(sorted(error.schema.get("properties", {}))) or "none"
        return f"{where}: unknown key {unexpected[0]!r}; allowed: {allowed}"
    if error.validator == "enum":
        return f"{where}: {error.instance!r} is not one of {', '.join(map(str, error.validator_value))}"
    if error.validator == "required":
        missing = next(key for key in error.validator_value if key not in error.instance)
        return f"{_where([*error.absolute_path, missing])}: required key missing"
    return f"{where}: {error.message[:200]}"


def task_problems(config: dict) -> list[str]:
    """Tasks some group uses that `data:` cannot prepare: a generated task needs the size of each split."""
    problems = []
    data = config.get("data") or {}
    for group in config.get("groups", []):
        for role, names in (("task", [group["task"]]), ("eval_tasks", group["eval_tasks"])):
            for name in names:
                task = get_task(name)
                if task.source != "generated":
                    continue
                missing = [f"{split}_size" for split in task.splits if f"{split}_size" not in data.get(name, {})]
                if missing:
                    problems.append(
                        f"groups[{group['name']}].{role}: task {name!r} is generated; give data.{name}.{missing[0]} (rows to generate)"
                    )
    for name, sizes in data.items():
        task = get_task(name)  # the schema has checked the name
        for split in task.splits if task.distinct else ():
            size, distinct = sizes.get(f"{split}_size"), task.distinct(name, split)
            if isinstance(size, int) and size > distinct:
                problems.append(
                    f"data.{name}.{split}_size: {size} exceeds the {distinct} distinct {name} {split} problems"
                )
    return problems


def recipe_problems(config: dict) -> list[str]:
    """Recipes of built models that no build could follow (klrl.models.recipe)."""
    from klrl.models import recipe_options
    from klrl.models.builds import BUILT_MODELS
    from klrl.models.recipe import recipe_settings

    problems = []
    declared = config.get("models") or {}
    for name, spec in declared.items():
        if name in BUILT_MODELS and "hub" not in spec:
            try:
                recipe_settings(name, recipe_options(name, declared))
            except ValueError as error:
                problems.append(str(error))
    return problems


def tracking_uri_problem(uri: str) -> str:
    """Why MLflow could not use `uri` as a tracking store ('' when it can)."""
    parsed = urlparse(uri)
    if parsed.scheme not in TRACKING_SCHEMES and not (parsed.scheme == "" and uri):
        return f"tracking.uri {uri!r}: scheme {parsed.scheme!r} is not one of {', '.join(TRACKING_SCHEMES)}"
    if parsed.scheme == "sqlite" and not uri.startswith("sqlite:///"):
        return f"tracking.uri {uri!r}: a SQLite store is sqlite:///<path> (three slashes; four for an absolute path)"
    if parsed.scheme in ("http", "https") and not parsed.hostname:
        return f"tracking.uri {uri!r}: no host"
    return ""


def registry_problem(schema: dict, schema_path: Path) -> str:
    """Where the schema's generated $defs (klrl.grid.config_schema) differ from the code: the enums of
    KL configurations and tasks from the registries, the train section from TrainConfig, a
    model's keys from the built models' recipes ('' when equal)."""
    regenerate = "run `python -m klrl config-docs`"
    for key, registry, home in (
        ("kl", STANDARD_CONFIGS, "klrl.objective.estimators.STANDARD_CONFIGS"),
        ("task", TASKS, "klrl.tasks.TASKS"),
    ):
        enum = schema["$defs"][key]["enum"]
        if enum != list(registry):
            missing = [name for name in registry if name not in enum]
            extra = [name for name in enum if name not in registry]
            what = (
                f"lacks {missing[0]!r} of {home}"
                if missing
                else f"has {extra[0]!r}, which {home} has not"
                if extra
                else f"lists {home} in another order"
            )
            return f"{schema_path}: $defs.{key}.enum {what}: {regenerate}"
    for key, generated, home in (
        ("train", train_schema(), "TrainConfig"),
        ("model_settings", model_schema(), "a model's entry (klrl.models.builds)"),
    ):
        written, code = schema["$defs"].get(key, {}).get("properties", {}), generated["properties"]
        for name in [*code, *(name for name in written if name not in code)]:
            if written.get(name) != code.get(name):
                what = (
                    f"lacks {name!r}, a field of {home}"
                    if name not in written
                    else f"has {name!r}, which {home} has not"
                    if name not in code
                    else f"differs from {home}'s field {name!r}"
                )
                return f"{schema_path}: $defs.{key} {what}: {regenerate}"
    return ""


def check_config(config: dict, source: str, schema_path: Path = SCHEMA) -> None:
    """Raise ValueError with one line naming the first problem of a workflow config read from
    `source` (its file name), or of the schema against the registries."""
    schema = yaml.safe_load(Path(schema_path).read_text())
    if problem := registry_problem(schema, schema_path):
        raise ValueError(problem)
    problem = schema_problem(config, schema)
    if problem:
        raise ValueError(f"{source}: {problem}")
    problems = task_problems(config) + recipe_problems(config)
    tracking = config.get("tracking") or {}
    if tracking.get("enabled", True) and "uri" in tracking:
        problems.append(tracking_uri_problem(tracking["uri"]))
    problems = [problem for problem in problems if problem]
    if problems:
        raise ValueError(f"{source}: {problems[0]}")


def named_files(paths: list) -> str:
    """The config files Snakemake read (absolute paths), as a message names them: relative to the
    working folder where inside it.

    >>> named_files([Path.cwd() / "config" / "paper.yaml", "/etc/klrl/overlay.yaml"])
    'config/paper.yaml + /etc/klrl/overlay.yaml'
    """
    return " + ".join(
        str(Path(path).relative_to(Path.cwd())) if Path(path).is_relative_to(Path.cwd()) else str(path)
        for path in paths
    )


def read_config(path: Path) -> dict:
    """The workflow config in the file `path`, checked (`check_config`): any problem, a YAML
    syntax error included, is a ValueError of one line naming the file."""
    config = read_yaml(path)
    check_config(config, str(path))
    return config
