"""config/README.md is the text generated from the schema, and it names every key."""

import dataclasses

import pytest
import yaml

from klrl.grid.config_check import SCHEMA
from klrl.reports.config_reference import README, render
from klrl.grid.expansion import GRID_KEYS
from klrl.training.config import TrainConfig


def test_config_readme_is_the_generated_text(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    assert README.read_text() == render(yaml.safe_load(SCHEMA.read_text())), "run `python -m klrl config-docs`"


def test_every_key_has_a_row_with_its_meaning(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    text = render(yaml.safe_load(SCHEMA.read_text()))
    for field in dataclasses.fields(TrainConfig):
        if field.name not in GRID_KEYS:
            assert f"| `train.{field.name}` |" in text
    assert "| `groups[].kl` | list of one of `none`, `k1-reward`," in text
    assert "| `evaluation.max_new_tokens` | integer ≥ 1 | required | completion length limit |" in text


def test_a_key_without_description_is_an_error_naming_it(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    schema = yaml.safe_load(SCHEMA.read_text())
    del schema["properties"]["evaluation"]["properties"]["greedy"]["description"]
    with pytest.raises(ValueError, match="evaluation.greedy has no description"):
        render(schema)
