"""A built base's recipe: resolved before it is hashed, one folder per hash, spelled out whole
for the build, and the corpus it names pinned (a change of the corpus must bump its version)."""

import dataclasses
import hashlib
import random
import subprocess
import sys

import pytest

from klrl.models import built_folder, recipe_options
from klrl.verbs.build import add_arguments, run
from klrl.models.builds import BUILT_MODELS
from klrl.models.tiny_settings import TinyConfig
from klrl.models.recipe import build_arguments, recipe_hash, recipe_settings

# sha256 (16 hex) of the first 8 batches' tokens and labels of the default recipe's corpus
# (steps=8: 6 clean batches, then 2 with corrupted answers). If this changes, the same recipe
# builds another model: bump the tiny recipe's version (klrl.models.builds) and then this value.
DEFAULT_CORPUS = "4a8066fd8ea0ef6c"


def test_a_recipe_is_hashed_resolved_so_equal_recipes_share_a_folder():
    default = recipe_hash("tiny", None)
    assert default == "a7903a8d7698"  # the folder every config with the default recipe reads
    assert recipe_hash("tiny", {}) == default == recipe_hash("tiny", {"steps": TinyConfig().steps})
    assert recipe_hash("tiny", {"steps": TinyConfig().steps + 1}) != default
    assert recipe_hash("tiny", {"floor": {"arith/t1": 0.01}}) != default  # the check is part of the recipe
    mix = {"arith": 0.7, "arith-long": 0.1, "arith-word": 0.2}
    assert recipe_hash("tiny", {"mix": dict(reversed(mix.items()))}) == recipe_hash("tiny", {"mix": mix})
    assert BUILT_MODELS["tiny"].recipe.version == 2  # the version in the pinned hash above
    config = {"models": {"tiny": {"pretrain": {"steps": 5}}}}
    assert (
        str(built_folder("tiny", config["models"])) == f"results/bases/tiny-{recipe_hash('tiny', {'steps': 5})}/model"
    )
    assert str(built_folder("smollm2-135m")) == f"results/bases/smollm2-135m-{recipe_hash('smollm2-135m', None)}/model"


def test_a_smollm2_recipe_is_its_layers_and_the_whole_model_keeps_its_folder():
    whole = recipe_hash("smollm2-135m", None)
    assert whole == "682ba415ccda"  # the folder every config built before `layers` existed
    assert recipe_hash("smollm2-135m", {}) == recipe_hash("smollm2-135m", {"layers": 30}) == whole
    assert recipe_hash("smollm2-135m", {"layers": 2}) not in (whole, recipe_hash("smollm2-135m", {"layers": 3}))
    declared = {"smollm2-135m": {"convert": {"layers": 2}}}
    assert (
        str(built_folder("smollm2-135m", declared))
        == f"results/bases/smollm2-135m-{recipe_hash('smollm2-135m', {'layers': 2})}/model"
    )
    assert build_arguments("smollm2-135m", {"layers": 2}) == ["--layers", "2"]
    assert build_arguments("smollm2-135m", {"layers": 30}) == []


def test_recipe_errors_are_one_line_and_name_the_key():
    with pytest.raises(ValueError, match="^models.tiny.pretrain: unknown key 'stpes'; known: hidden, layers"):
        recipe_settings("tiny", {"stpes": 3})
    with pytest.raises(ValueError, match="^models.tiny.pretrain.mix: 'math' is not a task of the tiny base"):
        recipe_settings("tiny", {"mix": {"math": 1.0}})
    with pytest.raises(
        ValueError, match="^models.tiny.pretrain.floor: 'arith/t2' is not '<task>/greedy' or '<task>/t1'"
    ):
        recipe_settings("tiny", {"floor": {"arith/t2": 0.5}})
    with pytest.raises(ValueError, match=r"^models.tiny.pretrain.floor: \{'arith/t1': 1.5\} is not ≥ 0, ≤ 1$"):
        recipe_settings("tiny", {"floor": {"arith/t1": 1.5}})
    with pytest.raises(
        ValueError, match="^models.tiny.pretrain.check_tasks: \\['math'\\] is not one of arith, arith-long"
    ):
        recipe_settings("tiny", {"check_tasks": ["math"]})  # before the floor's check across fields
    with pytest.raises(ValueError, match="^models.tiny.pretrain.steps: 2.5 is a float; it must be an integer$"):
        recipe_settings("tiny", {"steps": 2.5})
    with pytest.raises(
        ValueError,
        match="^models.smollm2-135m.pretrain: not a key of smollm2-135m; its recipe is models.smollm2-135m.convert$",
    ):
        recipe_options("smollm2-135m", {"smollm2-135m": {"pretrain": {"steps": 3}}})
    with pytest.raises(
        ValueError, match="^models.tiny.convert: not a key of tiny; its recipe is models.tiny.pretrain$"
    ):
        recipe_options("tiny", {"tiny": {"convert": {"layers": 2}}})
    with pytest.raises(ValueError, match="^models.smollm2-135m.convert: unknown key 'steps'; known: layers$"):
        recipe_settings("smollm2-135m", {"steps": 3})
    for layers, why in (
        (0, "is not ≥ 1, ≤ 30"),
        (31, "is not ≥ 1, ≤ 30"),
        (2.5, "is a float; it must be an integer or null"),
    ):
        with pytest.raises(ValueError, match=f"^models.smollm2-135m.convert.layers: {layers!r} {why}$"):
            recipe_settings("smollm2-135m", {"layers": layers})
    with pytest.raises(ValueError, match="'qwen' is not built here; built here: tiny, smollm2-135m"):
        built_folder("qwen")


def test_the_build_command_spells_out_the_whole_recipe(monkeypatch):
    """The options the workflow passes parse back to the recipe they came from, whatever the
    config left to the defaults: two configs with one recipe run one command."""
    import argparse

    options = {"steps": 7, "mix": {"arith": 1.0}, "floor": {"arith/greedy": 0.5}, "check_tasks": ["arith"]}
    made = []
    tiny = BUILT_MODELS["tiny"]
    recorded = dataclasses.replace(tiny.recipe, make=lambda out, settings: made.append(settings) or "made")
    monkeypatch.setitem(BUILT_MODELS, "tiny", dataclasses.replace(tiny, recipe=recorded))
    parser = argparse.ArgumentParser()
    add_arguments(parser, "tiny")
    args = parser.parse_args(["--out", "x", *build_arguments("tiny", options)])
    run(args)
    assert made == [recipe_settings("tiny", options)]
    assert build_arguments("tiny", options) == build_arguments("tiny", recipe_settings("tiny", options).__dict__)
    assert build_arguments("smollm2-135m", None) == []


def test_the_default_corpus_is_pinned():
    from klrl.models.tiny import build_tokenizer, example_batches

    digest = hashlib.sha256()
    batches = example_batches(build_tokenizer(), TinyConfig(steps=8), random.Random(0))
    for _ in range(8):
        tokens, labels, _mask = next(batches)
        digest.update(tokens.numpy().tobytes() + labels.numpy().tobytes())
    assert digest.hexdigest()[:16] == DEFAULT_CORPUS, (
        "the corpus changed: bump the tiny recipe's version, then DEFAULT_CORPUS"
    )


def test_pretrain_base_refuses_a_bad_recipe_in_one_line(tmp_path):
    command = [
        sys.executable,
        "-m",
        "klrl",
        "pretrain-base",
        "--out",
        str(tmp_path / "m"),
        "--floor",
        '{"arith/t2": 0.5}',
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "klrl pretrain-base: error: floor: 'arith/t2' is not '<task>/greedy' or '<task>/t1' of a checked task "
        "(arith, arith-long, arith-word, arith-spoken, arith-long-spoken) (--debug for the traceback)"
    ]
    assert not list(tmp_path.iterdir())
