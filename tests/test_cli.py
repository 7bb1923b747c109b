"""The command line: verbs listed, toy-bias writes its CSV, the tables of docs/audit.md are generated."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from klrl.objective.estimators import STANDARD_CONFIGS
from klrl.toy.bias import COLUMNS, markdown_summary, toy_rows


def _klrl(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "klrl", *args], capture_output=True, text=True, cwd=cwd)


def test_help_lists_the_verbs():
    result = _klrl("--help")
    assert result.returncode == 0
    for verb in ("describe", "toy-bias"):
        assert verb in result.stdout


def test_every_verb_module_is_registered_and_loads_no_library_for_help():
    """Each module of klrl.verbs is a verb of VERBS (the build verb: each built model's), and
    `--help` with every verb's module imported loads none of the libraries they drive."""
    from klrl.cli import VERBS
    from klrl.verbs import build

    package = Path(sys.modules["klrl.verbs"].__file__).parent
    modules = {path.stem for path in package.glob("*.py")} - {"__init__"}
    assert {verb.__name__.rpartition(".")[2] for verb in [*VERBS.values(), build]} == modules
    assert all(callable(verb.add_arguments) and callable(verb.run) and verb.HELP for verb in VERBS.values())
    code = (
        "import sys, klrl.cli; "
        "print(sorted(m for m in ('torch', 'pandas', 'mlflow', 'transformers', 'lm_eval', 'klrl.training', "
        "'klrl.analysis', 'klrl.tracking') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_version_is_the_package_version(repo_root):
    result = _klrl("--version")
    declared = next(
        line.split('"')[1]
        for line in (repo_root / "pyproject.toml").read_text().splitlines()
        if line.startswith("version =")
    )
    assert result.stdout.strip() == f"python -m klrl {declared}"


@pytest.mark.slow
def test_help_shows_defaults_and_train_help_lists_every_config_key():
    from dataclasses import fields

    from klrl.training.config import TrainConfig

    assert "(default: figures)" in _klrl("track-files", "--help").stdout
    text = _klrl("train", "--help").stdout
    for field in fields(TrainConfig):
        assert f"  {field.name}: {field.metadata['help']}" in text
    assert "  lr: AdamW learning rate (default: 0.0001)" in text


def test_cells_lists_the_grid_and_suggests_close_ids_for_a_typo(repo_root):
    listed = _klrl("cells", "--config", ".test/config/test.yaml", cwd=repo_root)
    assert listed.stdout.splitlines() == [
        "tiny__k1-reward__b0.1__on__s0\ton-policy",
        "tiny__k3-loss__b0.1__off__s0\toff-policy",
    ]
    typo = _klrl("cells", "--config", ".test/config/test.yaml", "tiny__k1-reward__b0.1__on__s1", cwd=repo_root)
    assert typo.returncode == 1
    assert (
        "'tiny__k1-reward__b0.1__on__s1' is not a cell of this config; closest: tiny__k1-reward__b0.1__on__s0"
        in typo.stderr
    )


def test_describe_rejects_an_unknown_configuration():
    result = _klrl("describe", "k4-reward")
    assert result.returncode != 0
    assert "unknown KL configuration 'k4-reward'" in result.stderr


@pytest.mark.slow
def test_toy_bias_writes_one_row_per_config_and_mode(tmp_path):
    out = tmp_path / "toy" / "bias.csv"
    result = _klrl("toy-bias", "--out", str(out), "--samples", "200", "--batch-size", "4", "--horizon", "3")
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(out.open()))
    assert tuple(rows[0]) == COLUMNS
    assert len(rows) == 2 * len(STANDARD_CONFIGS)
    assert {row["mode"] for row in rows} == {"on", "off"}
    by_key = {(row["config"], row["mode"]): row for row in rows}
    assert float(by_key[("k1-reward", "on")]["rel_bias"]) < 1e-12
    assert float(by_key[("k1-loss", "on")]["rel_bias"]) == pytest.approx(1.0, abs=1e-12)
    assert float(by_key[("k1-reward-prefixis", "off")]["rel_bias"]) < 1e-12
    assert float(by_key[("k3-loss", "off")]["rel_bias"]) > 0.05
    assert all(row["samples"] == "200" and row["batch_size"] == "4" for row in rows)


@pytest.mark.slow
def test_the_toy_table_of_docs_audit_equals_a_fresh_run(repo_root):
    page = (repo_root / "docs" / "audit.md").read_text()
    assert markdown_summary(toy_rows()) in page
