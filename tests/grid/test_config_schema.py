"""The schema's generated part (klrl.grid.config_schema) is the code's: the file is the generated text,
the schema refuses exactly the values TrainConfig and KLConfig refuse, and a field declared on
TrainConfig reaches the schema, the workflow's check and `klrl train --help` with no other edit."""

import dataclasses
import typing

import pytest
import yaml
from jsonschema import Draft202012Validator

from klrl.grid import config_schema
from klrl.core.allowed import Allowed, setting
from klrl.grid.config_check import SCHEMA, registry_problem
from klrl.grid.expansion import GRID_KEYS
from klrl.objective.kl_config import KL_OPTIONS, KLConfig
from klrl.training import config as train_config
from klrl.training.config import TrainConfig

REQUIRED = {"base_model": "m", "train_data": "t", "eval_data": "e", "reward": "arithmetic"}


@pytest.fixture
def schema_text(repo_root):
    return (repo_root / SCHEMA).read_text()


def test_the_schema_file_is_the_generated_text(schema_text):
    assert config_schema.render(schema_text, str(SCHEMA)) == schema_text, "run `python -m klrl config-docs`"
    assert registry_problem(yaml.safe_load(schema_text), SCHEMA) == ""


def _candidates(allowed: Allowed, kind) -> list:
    """Values on both sides of each declared end, every choice and one value outside them."""
    if allowed.choices:
        return [*allowed.choices, "bogus"]
    step = 1 if kind is int else 0.25
    ends = (allowed.minimum, allowed.exclusive_minimum, allowed.maximum, allowed.exclusive_maximum)
    return sorted({kind(end + delta) for end in ends if end is not None for delta in (-step, 0, step)})


def _agree(validator, section: dict, build) -> bool:
    try:
        build()
        built = True
    except ValueError:
        built = False
    return validator.is_valid(section) == built


def test_the_schema_refuses_exactly_the_values_the_train_config_refuses(schema_text):
    schema = yaml.safe_load(schema_text)
    train = Draft202012Validator(schema["$defs"]["train"] | {"$defs": schema["$defs"]})
    checked = 0
    for f in dataclasses.fields(TrainConfig):
        allowed = f.metadata.get("allowed")
        if not allowed or f.name in GRID_KEYS:
            continue
        base = REQUIRED | ({"generation_backend": "vllm"} if f.name == "engine_correction" else {})
        is_pair = f.name == "adam_betas"
        hint = typing.get_type_hints(TrainConfig)[f.name]
        kind = float if float in (hint, *typing.get_args(hint)) else int
        for value in _candidates(allowed, kind):
            value = (value, 0.5) if is_pair else value
            section = {f.name: list(value) if is_pair else value}
            assert _agree(train, section, lambda: TrainConfig(**base, **section)), (f.name, value)
            checked += 1
    assert checked > 80


def test_the_schema_refuses_exactly_the_kl_options_kl_config_refuses(schema_text):
    schema = yaml.safe_load(schema_text)
    kl = Draft202012Validator(schema["$defs"]["train"]["properties"]["kl"])
    for name in KL_OPTIONS:
        for value in (-0.5, 0.0, 0.5, None):
            build = lambda: KLConfig.from_name("k1-reward-seqis", beta=0.1, **{name: value})  # noqa: E731
            assert _agree(kl, {name: value}, build), (name, value)


def test_a_field_declared_on_train_config_reaches_the_schema_the_check_and_the_help(schema_text, monkeypatch):
    extended = dataclasses.make_dataclass(
        "TrainConfig",
        [("entropy_bonus", float, setting("weight of the entropy bonus", 0.0, allowed=Allowed(minimum=0)))],
        bases=(TrainConfig,),
    )
    monkeypatch.setattr(config_schema, "TrainConfig", extended)
    monkeypatch.setattr(train_config, "TrainConfig", extended)
    assert registry_problem(yaml.safe_load(schema_text), SCHEMA) == (
        f"{SCHEMA}: $defs.train lacks 'entropy_bonus', a field of TrainConfig: run `python -m klrl config-docs`"
    )
    written = yaml.safe_load(config_schema.render(schema_text, str(SCHEMA)))
    assert written["$defs"]["train"]["properties"]["entropy_bonus"] == {
        "type": "number",
        "minimum": 0,
        "description": "weight of the entropy bonus",
    }
    assert registry_problem(written, SCHEMA) == ""
    assert "  entropy_bonus: weight of the entropy bonus (default: 0.0)" in train_config.config_keys_help()


def test_a_bound_changed_in_the_code_stops_the_workflow_naming_the_field(schema_text):
    schema = yaml.safe_load(schema_text)
    schema["$defs"]["train"]["properties"]["group_size"]["minimum"] = 1
    assert registry_problem(schema, SCHEMA) == (
        f"{SCHEMA}: $defs.train differs from TrainConfig's field 'group_size': run `python -m klrl config-docs`"
    )
