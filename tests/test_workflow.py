"""The Snakemake workflow's configuration: schema and registries, grid expansion and its errors,
the paper's DAG (dry runs), lint."""

import re
import subprocess
from functools import reduce

import pytest
import yaml
from klrl.cli import main as klrl
from klrl.grid.config_check import SCHEMA
from klrl.grid.expansion import cell_id, expand_grid, parse_cell_id
from klrl.grid.gpu_leases import lease_prefix
from klrl.grid.biased_settings import report
from klrl.models.builds import BUILT_MODELS
from klrl.models.tiny_settings import TinyConfig
from klrl.models.recipe import recipe_hash
from workflow_helpers import (
    FIGURES,
    PAPER_MACHINE,
    ROOT,
    copy_workflow,
    job_counts,
    load_config,
    snakemake,
    train_commands,
)

# ---------------------------------------------------------------------------------- config


def test_every_built_model_name_is_one_the_schema_admits():
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    assert all(re.fullmatch(schema["$defs"]["model"]["pattern"], name) for name in BUILT_MODELS)


def test_the_default_grid_measures_every_claim():
    cells = expand_grid(load_config("config"))
    assert sum(cell.kl == "none" for cell in cells.values()) == 6  # once per policy mode (and lag) and seed, at β 0
    on = {cell.kl for cell in cells.values() if cell.policy == "on"}
    assert on == {"none", "k1-reward", "k1-loss", "k2-loss", "k3-reward", "k3-loss", "k1-both", "k3-both"}
    off = [cell for cell in cells.values() if cell.policy == "off"]
    assert {cell.kl for cell in off} == {"none", "k1-reward", "k1-loss", "k3-reward", "k3-loss", "k1-reward-prefixis"}
    assert all(cell.train["advantage"] == "group-mean" for cell in off)
    lags = {lag: {cell.kl for cell in off if cell.train["async_lag"] == lag} for lag in (4, 16)}
    assert lags[16] == {"none", "k1-reward", "k1-loss"} and len(lags[4]) == 6 and len(off) == 2 * (6 + 3)
    cell = cells["tiny__k1-loss__b1__on__s1"]
    assert cell.train["async_lag"] == 0
    assert (cell.train["kl"]["name"], cell.train["kl"]["beta"], cell.train["seed"]) == ("k1-loss", 1.0, 1)
    assert cell.train["base_model"] == f"results/bases/tiny-{recipe_hash('tiny', {})}/model"  # the default recipe
    assert cell.train["train_data"] == "results/default/data/arith/train.jsonl"
    assert parse_cell_id(cell.id) == {
        "model": "tiny",
        "kl": "k1-loss",
        "beta": 1.0,
        "policy": "on",
        "lag": 0,
        "seed": 1,
    }


def test_cell_ids_round_trip():
    for beta in (0.0, 0.005, 0.1, 1.0, 1e-5):
        assert parse_cell_id(cell_id("qwen2.5-7b", "k3-loss-tokis", beta, "off", 12))["beta"] == beta


def test_grid_errors_name_the_group_and_the_key():
    config = load_config("test")
    off = config["groups"][1]
    off["train"] = {}
    with pytest.raises(ValueError, match="group 'off-policy': policy 'off' needs train.async_lag"):
        expand_grid(config)
    config = load_config("test")
    config["train"]["seed"] = 3
    with pytest.raises(ValueError, match="train: 'seed' is set by the grid"):
        expand_grid(config)
    config = load_config("test")
    config["train"]["kl"] = {"name": "k1-loss"}
    with pytest.raises(ValueError, match="train: 'name' is set by the grid"):
        expand_grid(config)
    config = load_config("test")
    config["groups"][1] = dict(config["groups"][0], name="again")
    with pytest.raises(ValueError, match="cell tiny__k1-reward__b0.1__on__s0 is in groups 'on-policy' and 'again'"):
        expand_grid(config)
    config = load_config("test")
    config["train"]["minibatches"] = 3  # 4 prompts × 4 samples is not divisible by 3
    with pytest.raises(ValueError, match="group 'on-policy', cell tiny__k1-reward__b0.1__on__s0: .*'minibatches'"):
        expand_grid(config)


# A bad config and the start of the one line that names it after `<config file>: `.
BAD_CONFIGS = [
    (
        lambda c: c["train"].update(stepz=3),
        "train: unknown key 'stepz'; allowed: activation_checkpointing, adam_betas,",
    ),
    (
        lambda c: c["groups"][0].update(kl=["k4-reward"]),
        "groups[0].kl[0]: 'k4-reward' is not one of none, k1-reward, k1-loss,",
    ),
    (lambda c: c["evaluation"].update(samples=0), "evaluation.samples: 0 is less than the minimum of 1"),
    (lambda c: c.pop("experiment"), "experiment: required key missing"),
    (lambda c: c["groups"][1].pop("task"), "groups[1].task: required key missing"),
    (lambda c: c.update(groups="on-policy"), "groups: 'on-policy' is not of type 'array'"),
    (
        lambda c: c["data"].pop("arith-long"),
        "groups[on-policy].eval_tasks: task 'arith-long' is generated; give data.arith-long.train_size",
    ),
    (
        lambda c: c["data"]["arith"].update(train_size=3000),
        "data.arith.train_size: 3000 exceeds the 1673 distinct arith train problems",
    ),
    (
        lambda c: c.update(tracking={"uri": "sqlte:/x.db"}),
        "tracking.uri 'sqlte:/x.db': scheme 'sqlte' is not one of sqlite,",
    ),
    (
        lambda c: c.update(tracking={"uri": "sqlite://results/x.db"}),
        "tracking.uri 'sqlite://results/x.db': a SQLite store is sqlite:///<path>",
    ),
    (
        lambda c: c["models"]["tiny"]["pretrain"].update(mix={"math": 1.0}),
        "models.tiny.pretrain.mix: 'math' is not a task of the tiny base; its tasks: arith,",
    ),
    (
        lambda c: c["models"].update({"smollm2-135m": {"pretrain": {"steps": 3}}}),
        "models.smollm2-135m.pretrain: not a key of smollm2-135m; its recipe is models.smollm2-135m.convert",
    ),
    (
        lambda c: c["models"].update({"smollm2-135m": {"convert": {"layers": 31}}}),
        "models.smollm2-135m.convert.layers: 31 is",
    ),
]


# Each case starts Snakemake (about 6 s of CPU): the first runs in the quick suites, the rest are
# slow; test_a_bad_config_stops_klrl_cells_in_one_line checks every message in-process.
SNAKEMAKE_BAD_CONFIGS = [BAD_CONFIGS[0], *(pytest.param(*case, marks=pytest.mark.slow) for case in BAD_CONFIGS[1:])]


@pytest.mark.parametrize(("edit", "message"), SNAKEMAKE_BAD_CONFIGS)
def test_a_bad_config_stops_snakemake_before_any_job(tmp_path, edit, message):
    """One line naming the file, the key and what is allowed: never a traceback, the schema or the config dumped."""
    folder = copy_workflow(tmp_path)
    config = load_config("test")
    edit(config)
    (folder / "bad.yaml").write_text(yaml.safe_dump(config))
    result = snakemake(folder, "-n", "--configfile", "bad.yaml")
    assert result.returncode != 0
    assert (result.stdout + result.stderr).startswith(f"bad.yaml: {message}")
    assert len((result.stdout + result.stderr).splitlines()) == 1
    assert not (folder / "results").exists()


@pytest.mark.parametrize(("edit", "message"), BAD_CONFIGS)
def test_a_bad_config_stops_klrl_cells_in_one_line(tmp_path, monkeypatch, capsys, edit, message):
    """`make run` and `make cells` read the config through `klrl cells` first."""
    config = load_config("test")
    edit(config)
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.chdir(ROOT)
    assert klrl(["cells", "--config", str(tmp_path / "bad.yaml")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"klrl cells: error: {tmp_path / 'bad.yaml'}: {message}")
    assert len(error.splitlines()) == 1


def _required_keys(schema: dict, config, root: dict, path: tuple = ()) -> list[tuple]:
    """The path of every key that `schema` requires somewhere in `config` (`$ref`s followed)."""
    schema = root["$defs"][schema["$ref"].split("/")[-1]] if "$ref" in schema else schema
    if isinstance(config, list):
        return [
            key
            for i, item in enumerate(config)
            for key in _required_keys(schema.get("items", {}), item, root, (*path, i))
        ]
    if not isinstance(config, dict):
        return []
    keys = [(*path, key) for key in schema.get("required", [])]
    for key, value in config.items():
        extra = schema.get("additionalProperties")
        inner = schema.get("properties", {}).get(key, extra if isinstance(extra, dict) else {})
        keys += _required_keys(inner, value, root, (*path, key))
    return keys


def _spelled(path: tuple) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(".")


SCHEMA_TREE = yaml.safe_load((ROOT / SCHEMA).read_text())
REQUIRED_KEYS = _required_keys(SCHEMA_TREE, load_config("test"), SCHEMA_TREE)


@pytest.mark.parametrize("path", REQUIRED_KEYS, ids=map(_spelled, REQUIRED_KEYS))
def test_klrl_cells_names_each_missing_required_key_in_one_line(path, tmp_path, monkeypatch, capsys):
    """`make run` and `make cells` read a config through `klrl cells`: a config without a key the
    schema requires is one line naming the file and the key, never a traceback (KeyError)."""
    config = load_config("test")
    *parents, key = path
    reduce(lambda node, part: node[part], parents, config).pop(key)
    (tmp_path / "no-key.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.chdir(ROOT)
    assert klrl(["cells", "--config", str(tmp_path / "no-key.yaml")]) == 2
    message = f"{tmp_path / 'no-key.yaml'}: {_spelled(path)}: required key missing"
    assert capsys.readouterr().err == f"klrl cells: error: {message} (--debug for the traceback)\n"


@pytest.mark.slow
def test_config_overrides_apply_on_top_of_the_default_config(tmp_path):
    folder = copy_workflow(tmp_path)
    result = snakemake(folder, "-n", "-p", "--config", "experiment=override", "--", "results/override/mlflow/runs.json")
    assert result.returncode == 0, result.stderr[-2000:]
    default_cells = expand_grid(load_config("config"))
    assert f"--cells {' '.join(f'{c.group}:{c.id}' for c in default_cells.values())}" in " ".join(result.stdout.split())


@pytest.mark.slow
def test_an_unknown_cell_path_names_the_closest_cells(tmp_path):
    folder = copy_workflow(tmp_path)
    result = snakemake(
        folder,
        "-n",
        "--configfile",
        ".test/config/test.yaml",
        "--",
        "results/ci-test/cells/tiny__k1-reward__b0.1__on__s5/eval/results.json",
    )
    assert result.returncode != 0
    assert (
        "'tiny__k1-reward__b0.1__on__s5' is not a cell of this config; closest: tiny__k1-reward__b0.1__on__s0"
        in result.stdout + result.stderr
    )


# The dry runs that several tests read, each planned once (a Snakemake start and DAG costs seconds):
# config/paper.yaml on the SLURM profile and .test/config/test.yaml, fresh copies, shell commands printed.
@pytest.fixture(scope="module")
def paper_dry_run(tmp_path_factory) -> subprocess.CompletedProcess:
    folder = copy_workflow(tmp_path_factory.mktemp("paper"))
    result = snakemake(
        folder, "-n", "-p", "--configfile", "config/paper.yaml", "--profile", "profiles/slurm", environ=PAPER_MACHINE
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def ci_dry_run(tmp_path_factory) -> subprocess.CompletedProcess:
    folder = copy_workflow(tmp_path_factory.mktemp("ci"))
    result = snakemake(folder, "-n", "-p", "--configfile", ".test/config/test.yaml")
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.mark.slow
def test_the_paper_config_dry_runs_to_its_grid(paper_dry_run):
    cells = expand_grid(load_config("paper"))
    assert (
        len(cells) == 2 * (1 + 4 * 4) + 2 + 5 + 5 + 1
    )  # on-policy β sweep ×2 models, both, off-policy ×2 tasks, prefix-IS
    result = paper_dry_run
    counts = job_counts(result.stdout)
    assert counts["train"] == counts["evaluate"] == len(cells)
    assert counts["evaluate_base"] == 3
    assert counts["prepare_data"] == 5
    assert counts["figure"] == len(FIGURES)
    assert counts["cell_settings"] == len(cells) and counts["plan"] == 1
    assert (
        counts["total"] == 3 * len(cells) + 3 + 5 + len(FIGURES) + 6
    )  # + plan, track_grid, toy_bias, aggregate, track_figures, all
    assert "gpu=8" in result.stdout and "gpu=4" in result.stdout
    # the biased KL settings, each once: those of `klrl describe --config`, k1-loss on-policy as doing nothing
    listed = report(cells)
    assert listed in result.stderr and result.stderr.count(listed.splitlines()[1]) == 1
    assert "  k1-loss (on-policy; 8 cells): does nothing, its KL term's expected gradient is zero" in listed


@pytest.mark.slow
@pytest.mark.parametrize("name", ["smollm2", "study", "mechanism"])
def test_every_other_shipped_config_dry_runs_to_one_train_and_evaluate_job_per_cell(tmp_path, name):
    """The configs not run end to end here (paper: above; config and test: for real) pass the
    config checks and plan their whole grid; a cell that trains under bf16-autocast has its KL
    measured so (SmolLM2's), the others in float32."""
    folder = copy_workflow(tmp_path)
    result = snakemake(folder, "-n", "-p", "--configfile", f"config/{name}.yaml")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    counts = job_counts(result.stdout)
    cells = expand_grid(load_config(name))
    assert counts["train"] == counts["evaluate"] == counts["cell_settings"] == len(cells)
    commands = [" ".join(line.split()) for line in result.stdout.splitlines() if " klrl evaluate " in line]
    for cell in cells.values():
        (command,) = [line for line in commands if f"/cells/{cell.id}/eval/" in line]
        autocast = cell.train["mixed_precision"] == "bf16-autocast"
        assert ("--mechanism-precision bf16-autocast" in command) == autocast == (name == "smollm2"), cell.id


def test_a_batch_that_gpus_cannot_share_is_a_grid_error():
    config = load_config("paper")
    config["train"]["prompts_per_step"] = 250
    with pytest.raises(
        ValueError, match="group 'on-policy': prompts_per_step 250 is not a multiple of the 8 training processes"
    ):
        expand_grid(config)


@pytest.mark.slow
def test_multi_gpu_cells_train_under_torchrun(paper_dry_run, ci_dry_run):
    """Under a GPU lease of their count (tests/grid/test_gpu_leases.py); CPU cells under neither."""
    commands = train_commands(paper_dry_run.stdout)
    cells = expand_grid(load_config("paper"))
    assert len(commands) == len(cells)
    four = sum(cell.model == "qwen3-4b-instruct" for cell in cells.values())
    assert commands.count(f"{lease_prefix(8)} torchrun --standalone --nproc_per_node 8 -m klrl") == len(cells) - four
    assert commands.count(f"{lease_prefix(4)} torchrun --standalone --nproc_per_node 4 -m klrl") == four > 0
    commands = train_commands(ci_dry_run.stdout)
    assert commands and set(commands) == {"python -m klrl"}


@pytest.mark.slow
def test_each_cells_evaluation_measures_its_kl_against_its_base_and_a_bases_does_not(ci_dry_run):
    """Each cell's evaluate job gets its base model (the folder evaluate_base reads), β, training
    task and decoding, and the config's measurement size; a base model's job none of them."""
    config = load_config("test")
    base = f"results/bases/tiny-{recipe_hash('tiny', config['models']['tiny']['pretrain'])}/model"
    commands = [" ".join(line.split()) for line in ci_dry_run.stdout.splitlines() if " klrl evaluate " in line]
    cells = expand_grid(config)
    for cell in cells.values():
        (command,) = [line for line in commands if f"--out results/ci-test/cells/{cell.id}/eval/" in line]
        expected = f"--reference {base} --beta {cell.beta!r} --mechanism-task {cell.task} --mechanism-temperature"
        assert expected in command
        assert (
            f"--mechanism-max-new-tokens {cell.train['max_new_tokens']} --mechanism-prompts 8 --mechanism-samples 2"
            in command
        )
    (base_command,) = [line for line in commands if "--out results/ci-test/base/tiny/" in line]
    assert f"--model {base} " in base_command and "--reference" not in base_command and "--beta" not in base_command


@pytest.mark.slow
def test_a_base_is_built_once_per_recipe_and_read_by_every_config_with_it(ci_dry_run, tmp_path):
    """The tiny base of .test/config/test.yaml goes to results/bases/tiny-<hash>/ (its dry run
    on a fresh copy); once it is there, another config with the same recipe (spelled otherwise)
    plans no build and trains from that folder, and a changed recipe plans a build into another
    folder, and every cell again."""
    folder = copy_workflow(tmp_path)
    first = load_config("test")
    recipe = first["models"]["tiny"]["pretrain"]
    base = f"results/bases/tiny-{recipe_hash('tiny', recipe)}/model"
    assert job_counts(ci_dry_run.stdout)["build_base"] == 1 and f"{base}/config.json" in ci_dry_run.stdout
    (folder / base).mkdir(parents=True)
    (folder / base / "config.json").write_text("{}")  # as the first config's run leaves it
    same = dict(
        first,
        experiment="same-recipe",
        models={"tiny": {"pretrain": recipe | {"seed": TinyConfig().seed, "lr": TinyConfig().lr}}},
    )
    changed = dict(
        first, experiment="new-recipe", models={"tiny": {"pretrain": recipe | {"steps": recipe["steps"] + 1}}}
    )
    for config in (same, changed):
        (folder / f"{config['experiment']}.yaml").write_text(yaml.safe_dump(config))
    dry = snakemake(folder, "-n", "-p", "--configfile", "same-recipe.yaml")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "build_base" not in job_counts(dry.stdout) and job_counts(dry.stdout)["train"] == 2
    assert f'"base_model": "{base}"' in dry.stdout
    dry = snakemake(folder, "-n", "--configfile", "new-recipe.yaml")
    assert dry.returncode == 0, dry.stderr[-3000:]
    other = f"results/bases/tiny-{recipe_hash('tiny', changed['models']['tiny']['pretrain'])}/model/config.json"
    assert job_counts(dry.stdout)["build_base"] == 1 and job_counts(dry.stdout)["train"] == 2 and other in dry.stdout


@pytest.mark.slow
def test_the_workflow_lints_clean(tmp_path):
    folder = copy_workflow(tmp_path)
    result = snakemake(folder, "--lint", "--configfile", ".test/config/test.yaml")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Congratulations, your workflow is in a good condition!" in result.stdout + result.stderr
