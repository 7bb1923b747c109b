"""A cell's settings go from the grid to the train job's TrainConfig unchanged in value and type,
and every config a user can run (config/*.yaml, the paper with its CPU overlay, the SmolLM2 pilot
layered over its study) gets there."""

import json
import subprocess
import sys

import pytest
import yaml
from klrl.grid.expansion import expand_grid, settings_json
from klrl.core.paths import Layout
from klrl.training.config import TrainConfig, load_config
from klrl.core.typed import from_mapping
from snakemake.utils import update_config
from workflow_helpers import ROOT

CONFIGS = sorted(
    str(path.relative_to(ROOT)) for folder in ("config", ".test/config") for path in (ROOT / folder).glob("*.yaml")
)
PAPER_MINI = ("config/paper.yaml", "config/overlays/cpu-mini.yaml")
SMOLLM2_PILOT = ("config/smollm2.yaml", "config/pilots/smollm2.yaml")
MECHANISM_PILOT = ("config/mechanism.yaml", "config/pilots/mechanism.yaml")


def _load(*names: str) -> dict:
    config: dict = {}
    for name in names:
        update_config(config, yaml.safe_load((ROOT / name).read_text()))
    return config


def _same_types(a, b, where: str = "") -> None:
    assert type(a) is type(b), f"{where}: {a!r} ({type(a).__name__}) != {b!r} ({type(b).__name__})"
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _same_types(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same_types(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


@pytest.mark.parametrize(
    "names", [(name,) for name in CONFIGS] + [PAPER_MINI, SMOLLM2_PILOT, MECHANISM_PILOT], ids="+".join
)
def test_every_cell_reaches_its_train_config_with_identical_values_and_types(names, tmp_path):
    cells = expand_grid(_load(*names))
    assert cells
    for cell in cells.values():
        path = tmp_path / f"{cell.id}.json"
        path.write_text(settings_json(cell))  # what the cell_settings rule writes
        config = load_config(path)
        _same_types(config.to_dict(), cell.train, cell.id)
        assert isinstance(config.lr, float) and isinstance(config.steps, int)
        assert (config.kl.name, config.kl.beta, config.seed) == (cell.kl, cell.beta, cell.seed)


def test_the_paper_learning_rate_survives_as_a_float():
    cell = next(iter(expand_grid(_load("config/paper.yaml")).values()))
    assert json.loads(settings_json(cell))["lr"] == 1e-06


def _base_values(**extra) -> dict:
    return {"base_model": "m", "train_data": "t", "eval_data": "e", "reward": "arithmetic"} | extra


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"lr": "1e-06"}, r"train config.lr: '1e-06' is a str; it must be a number"),
        ({"steps": 2.5}, r"train config.steps: 2.5 is a float; it must be an integer"),
        ({"steps": "three"}, r"train config.steps: 'three' is a str; it must be an integer"),
        ({"steps": True}, r"train config.steps: True is a bool; it must be an integer"),
        (
            {"micro_batch_size": "None"},
            r"train config.micro_batch_size: 'None' is a str; it must be an integer or null",
        ),
        ({"kl": {"name": "none", "beta": 0.5}}, r"kl 'none'\) would be ignored"),
        ({"kl": {"name": "k1-reward", "beta": 0.1, "value_clamp": 0}}, r"KLConfig.value_clamp: 0.0 must be > 0"),
        ({"kl": {"name": "k1-reward", "beta": 0.1, "clamp": 1}}, r"unknown key 'clamp'"),
        ({"ratio_clamp": 0.0}, r"bad value for 'ratio_clamp': 0.0"),
        ({"ratio_clamp": -1.0}, r"bad value for 'ratio_clamp': -1.0"),
        ({"ppo_clip": 0.0}, r"bad value for 'ppo_clip': 0.0"),
        ({"lr": 0.0}, r"bad value for 'lr': 0.0"),
        ({"grad_clip": 0.0}, r"bad value for 'grad_clip': 0.0"),
        ({"eval_samples": 0}, r"bad value for 'eval_samples': 0"),
        ({"adam_betas": [0.9]}, r"train config.adam_betas: \[0.9\] must be a list of 2"),
    ],
)
def test_a_wrong_type_or_a_do_nothing_value_is_refused_naming_the_field(extra, message):
    with pytest.raises(ValueError, match=message):
        from_mapping(TrainConfig, _base_values(**extra), "train config")


def test_integers_stay_integers_and_numbers_become_floats():
    config = from_mapping(TrainConfig, _base_values(lr=1, steps=3, adam_betas=[0, 0.5]), "train config")
    assert (config.lr, type(config.lr), config.steps, config.adam_betas) == (1.0, float, 3, (0.0, 0.5))


def test_command_line_overrides_are_parsed_by_the_field_type(tmp_path):
    path = tmp_path / "cell.json"
    path.write_text(json.dumps(_base_values(kl={"name": "k3-loss", "beta": 0.1})))
    config = load_config(path, ["lr=1e-6", "steps=7", "micro_batch_size=null", "kl.value_clamp=10", "kl.beta=0.5"])
    assert (config.lr, config.steps, config.micro_batch_size) == (1e-6, 7, None)
    assert (config.kl.name, config.kl.beta, config.kl.value_clamp) == ("k3-loss", 0.5, 10.0)
    with pytest.raises(ValueError, match=r"train config.steps: '2.5' must be an integer"):
        load_config(path, ["steps=2.5"])
    with pytest.raises(ValueError, match=r"override 'bta': unknown train config key"):
        load_config(path, ["bta=1"])


@pytest.mark.slow
def test_the_train_verb_names_a_bad_setting_in_one_line(tmp_path):
    path = tmp_path / "cell.json"
    path.write_text(json.dumps(_base_values(steps="three")))
    result = subprocess.run(
        [sys.executable, "-m", "klrl", "train", "--config", str(path), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "train config.steps: 'three' is a str; it must be an integer" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_settings_files_written_by_snakemake_load_identically(tmp_path):
    """The cell_settings rule, run for real over the paper grid, writes files that load back
    to each cell's TrainConfig (values and types)."""
    from workflow_helpers import PAPER_MACHINE, copy_workflow, snakemake

    folder = copy_workflow(tmp_path)
    config = _load("config/paper.yaml")
    cells, layout = expand_grid(config), Layout.of(config)
    targets = [str(layout.settings(cell)) for cell in cells]
    result = snakemake(
        folder, "--cores", "1", "--configfile", "config/paper.yaml", "--", *targets, environ=PAPER_MACHINE
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for cell in cells.values():
        loaded = load_config(folder / layout.settings(cell.id))
        _same_types(loaded.to_dict(), cell.train, cell.id)
