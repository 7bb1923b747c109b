"""docs/extending.md, "How to add an estimator, a task, a model or a figure": each recipe followed with a
dummy one: what the recipe's steps give, and the named error when a step is left out."""

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer

from klrl.objective import estimators
from klrl.objective.kl_config import KLConfig, check_standard_configs
from klrl.objective.gradient_claims import claims_markdown, describe
from klrl.grid import config_schema
from klrl.grid.config_check import check_config, registry_problem
from klrl.objective.estimators import TOKEN_FORWARD_KL, Estimator, GradientClaim, check_registry
from klrl.evaluation.harness import Decoding, evaluate
from klrl.core.allowed import Allowed, setting
from klrl.cli import main as klrl
from klrl.grid.expansion import expand_grid
from klrl.models.base import BaseModel, Recipe
from klrl.models.builds import BUILT_MODELS
from klrl.models.recipe import build_arguments, recipe_hash
from klrl.core.paths import METRICS
from klrl.training.record import read_metrics, read_status
from klrl.objective.kl import token_kl
from klrl.tasks import TASKS, Task
from klrl.tasks.data import prepare, read_split
from klrl.toy.exact import expected_gradient
from klrl_audit.targets import token_kl_gradient
from klrl_audit.toy import make_problem
from synthetic_grid import write_grid
from workflow_helpers import FIGURES, ROOT, copy_workflow, job_counts, load_config, snakemake

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def _regenerated_schema(tmp_path):
    """Step "run `python -m klrl config-docs`" of a recipe, its schema written to a copy."""
    path = tmp_path / "schema.yaml"
    path.write_text(config_schema.render(SCHEMA.read_text(), str(SCHEMA)))
    return path


def _trains(cell, data_sizes: dict, base=None) -> list[int]:
    """What the rules prepare_data and train run for `cell`, in the current folder (the tiny test
    base standing in for the config's, unless the cell's own is built): the steps recorded."""
    train = cell.train | ({"base_model": str(base)} if base else {})
    prepare(cell.task, Path(train["train_data"]).parent, seed=0, sizes=data_sizes)
    Path("cell.json").write_text(json.dumps(train))
    assert klrl(["train", "--config", "cell.json", "--out", "cell"]) == 0
    assert read_status(Path("cell"))["status"] == "completed"
    return [row["step"] for row in read_metrics(Path("cell") / METRICS)]


# ------------------------------------------------------------------------------- estimator


def _naive_k3(delta):
    return (-delta).exp() - 1 + delta


# K3 by its textbook formula, under another name: its claims are K3's, so the exact toy check applies
K4 = Estimator(
    "k4",
    "K4_t = exp(−δ_t) − 1 + δ_t",
    _naive_k3,
    unbiased_value=True,
    on_policy={
        "reward": GradientClaim(estimators.OTHER, "β E[(Σ_t K4_t) ∇log πθ(y)]"),
        "loss": GradientClaim(TOKEN_FORWARD_KL, "β E[Σ_t (1 − ρ_t) ∇log πθ(y_t)] = β Σ_t ∇KL(πref‖πθ) per prefix"),
        "both": GradientClaim(estimators.SEQUENCE_REVERSE_KL, "β ∇E[Σ_t K4_t]"),
    },
)


@pytest.fixture
def with_k4(monkeypatch):
    """The estimator in ESTIMATORS, its configuration with a colour in STANDARD_CONFIGS."""
    monkeypatch.setitem(estimators.ESTIMATORS, "k4", K4)
    monkeypatch.setitem(estimators.STANDARD_CONFIGS, "k4-loss", "#00a0a0")
    check_registry()
    check_standard_configs()


def test_a_new_estimator_is_a_configuration_the_loss_describe_and_the_figures_know(with_k4):
    config = KLConfig.from_name("k4-loss", beta=0.1)
    assert (config.estimator, config.placement, config.name) == ("k4", "loss", "k4-loss")
    assert KLConfig.from_name("k4-loss-tokis", beta=0.1).correction == "token-is"  # its value is unbiased
    delta = torch.tensor([-1.0, 0.5, 2.0], dtype=torch.float64)
    assert torch.allclose(token_kl(delta, torch.zeros(3), "k4").values, token_kl(delta, torch.zeros(3), "k3").values)
    assert describe(config)["on"].target == TOKEN_FORWARD_KL
    assert describe(config)["off"].gradient.endswith("per prefix, with y ~ μ and token weights ω_t on the score term")
    assert claims_markdown().splitlines()[-1].startswith("| `k4-loss` | biased (token-forward-kl): ")
    sys.path.insert(0, str(ROOT / "paper_figures"))
    try:
        from helpers import style
    finally:
        sys.path.remove(str(ROOT / "paper_figures"))
    assert style.color("k4-loss") == "#00a0a0"


def test_a_new_estimators_claim_is_checked_exactly_on_the_toy_policy(with_k4):
    problem = make_problem(vocab=3, horizon=3, seed=0)
    config = KLConfig.from_name("k4-loss", beta=1.0)
    assert torch.allclose(
        expected_gradient(problem, config, "on"), token_kl_gradient(problem, "on", "forward"), atol=1e-10
    )


def test_the_workflow_refuses_a_schema_without_the_new_configuration_then_trains_its_cell(
    with_k4, tiny_base, tmp_path, monkeypatch
):
    assert registry_problem(yaml.safe_load(SCHEMA.read_text()), SCHEMA) == (
        f"{SCHEMA}: $defs.kl.enum lacks 'k4-loss' of klrl.objective.estimators.STANDARD_CONFIGS: run `python -m klrl config-docs`"
    )
    config = load_config("test")
    config["groups"][0]["kl"] = ["k4-loss"]
    check_config(config, ".test/config/test.yaml", _regenerated_schema(tmp_path))
    cell = expand_grid(config)["tiny__k4-loss__b0.1__on__s0"]
    assert cell.train["kl"]["name"] == "k4-loss"
    monkeypatch.chdir(tmp_path)
    assert _trains(cell, {"train": 64, "test": 16}, base=tiny_base) == [0, 1, 2, 3]


# ------------------------------------------------------------------------------------ task


def _doubles(name: str, split: str, seed: int, size: int | None, source: str) -> list[dict]:
    offset = 0 if split == "train" else 100
    return [
        {
            "id": f"{name}-{split}-{i:05d}",
            "problem": f"Double {offset + i}.",
            "answer": str(2 * (offset + i)),
            "meta": {},
        }
        for i in range(size)
    ]


DOUBLE = Task(
    "double",
    "arithmetic",
    ("train", "test"),
    " Answer in \\boxed{}.",
    "generated",
    "in-domain (dummy): a number doubled",
    _doubles,
)


@pytest.fixture
def with_double(monkeypatch):
    """The task in TASKS: loader, reward, splits, instruction, source, description."""
    monkeypatch.setitem(TASKS, "double", DOUBLE)


def test_a_new_task_is_prepared_and_evaluated_through_lm_eval(with_double, tiny_base, tmp_path):
    data = tmp_path / "data"
    prepare("double", data / "double", sizes={"train": 8, "test": 3})
    rows = read_split(data / "double" / "test.jsonl")
    assert [row["prompt"] for row in rows] == [
        "Double 100. Answer in \\boxed{}.",
        "Double 101. Answer in \\boxed{}.",
        "Double 102. Answer in \\boxed{}.",
    ]
    results, _ = evaluate(str(tiny_base), ["double"], data, Decoding(samples=1, greedy=True, max_new_tokens=4))
    assert [sample["doc"]["id"] for sample in results["samples"]["klrl_double"]] == [row["id"] for row in rows]
    assert 0.0 <= results["results"]["klrl_double"]["pass@1,all-samples"] <= 1.0


def test_the_workflow_refuses_a_schema_without_the_new_task_then_trains_on_it(
    with_double, tiny_base, tmp_path, monkeypatch
):
    assert registry_problem(yaml.safe_load(SCHEMA.read_text()), SCHEMA).startswith(
        f"{SCHEMA}: $defs.task.enum lacks 'double' of klrl.tasks.TASKS"
    )
    config = load_config("test")
    config["groups"][0] |= {"task": "double", "eval_tasks": ["double", "arith"]}
    config["data"]["double"] = {"train_size": 8, "test_size": 3}
    check_config(config, ".test/config/test.yaml", _regenerated_schema(tmp_path))
    cell = expand_grid(config)["tiny__k1-reward__b0.1__on__s0"]
    assert (cell.train["task"], cell.train["reward"], cell.train["train_data"]) == (
        "double",
        "arithmetic",
        "results/ci-test/data/double/train.jsonl",
    )
    monkeypatch.chdir(tmp_path)
    assert _trains(cell, {"train": 8, "test": 3}, base=tiny_base) == [0, 1, 2, 3]


# ----------------------------------------------------------------------------------- model


@pytest.mark.slow
def test_a_model_declared_in_a_config_gets_its_cells_and_no_build_job(tiny_base, tmp_path):
    folder = copy_workflow(tmp_path)
    config = load_config("test")
    config["models"] = {"my-model": {"hub": str(tiny_base), "stop_tokens": ["z"]}}
    for group in config["groups"]:
        group["models"] = ["my-model"]
    (folder / "config" / "mine.yaml").write_text(yaml.safe_dump(config))
    cells = expand_grid(config)
    assert {
        (cell.train["model"], cell.train["base_model"], tuple(cell.train["stop_tokens"])) for cell in cells.values()
    } == {("my-model", str(tiny_base), ("z",))}
    result = snakemake(folder, "-n", "-p", "--configfile", "config/mine.yaml")
    assert result.returncode == 0, result.stderr[-3000:]
    counts = job_counts(result.stdout)
    assert "build_base" not in counts and counts["train"] == len(cells)
    assert (
        f"--model {tiny_base} " in " ".join(result.stdout.split()) and "--stop-tokens z" in result.stdout
    )  # evaluate_base


# ----------------------------------------------------------------------------- built model


@dataclass
class Rescaled:
    """The dummy built model's recipe: the tiny test base with its embeddings scaled."""

    scale: float = setting("factor on the token embeddings", 1.0, allowed=Allowed(exclusive_minimum=0))


@pytest.fixture
def with_rescaled(monkeypatch, tiny_base):
    """Steps 1-2 of the recipe: a settings dataclass and a build function, declared in BUILT_MODELS."""

    def rescale(out, settings: Rescaled) -> str:
        model = AutoModelForCausalLM.from_pretrained(tiny_base)
        model.get_input_embeddings().weight.data *= settings.scale
        model.save_pretrained(out)
        AutoTokenizer.from_pretrained(tiny_base).save_pretrained(out)
        return f"rescaled → {out}"

    recipe = Recipe(Rescaled, version=1, make=rescale, summary="the tiny test base, rescaled (a dummy)")
    monkeypatch.setitem(BUILT_MODELS, "rescaled", BaseModel("rescaled", "rescale", verb="rescale-base", recipe=recipe))
    return tiny_base


def test_a_new_built_model_is_built_by_its_verb_then_trains_a_cell(with_rescaled, tmp_path, monkeypatch):
    assert registry_problem(yaml.safe_load(SCHEMA.read_text()), SCHEMA) == (
        f"{SCHEMA}: $defs.model_settings lacks 'rescale', a field of a model's entry (klrl.models.builds): "
        "run `python -m klrl config-docs`"
    )
    schema = _regenerated_schema(tmp_path)  # step 3
    config = load_config("test")
    config["models"]["rescaled"] = {"rescale": {"scale": 0}}
    with pytest.raises(
        ValueError,
        match=r"^.test/config/test.yaml: models.rescaled.rescale.scale: 0 is less than or equal to the minimum of 0$",
    ):
        check_config(config, ".test/config/test.yaml", schema)
    config["models"]["rescaled"] = {"rescale": {"scale": 0.5}}
    config["groups"] = config["groups"][:1]
    config["groups"][0]["models"] = ["rescaled"]
    check_config(config, ".test/config/test.yaml", schema)
    cell = expand_grid(config)["rescaled__k1-reward__b0.1__on__s0"]
    folder = f"results/bases/rescaled-{recipe_hash('rescaled', {'scale': 0.5})}/model"
    assert cell.train["base_model"] == folder

    monkeypatch.chdir(tmp_path)  # what the rule build_base, then the rule train, run
    assert klrl(["rescale-base", "--out", folder, *build_arguments("rescaled", {"scale": 0.5})]) == 0
    embeddings = AutoModelForCausalLM.from_pretrained(folder).get_input_embeddings().weight
    assert torch.equal(
        embeddings, 0.5 * AutoModelForCausalLM.from_pretrained(with_rescaled).get_input_embeddings().weight
    )
    assert _trains(cell, {"train": 64, "test": 16}) == [0, 1, 2, 3]


# ---------------------------------------------------------------------------------- figure

DUMMY_FIGURE = '''"""Final pass@1 of every cell, one bar each (a dummy figure). The claim: none in particular."""

from helpers.style import arguments, color, plt, read, save, title

args = arguments(__doc__)
scores = read(args.tables, "scores").dropna(subset=["pass@1"])
figure, ax = plt.subplots()
ax.bar(range(len(scores)), scores["pass@1"], color=[color(kl) for kl in scores["kl"]])
title(figure, "every cell scores")
save(figure, args.out, "dummy_scores")
'''


@pytest.mark.slow
def test_a_new_figure_script_is_a_figure_job_and_draws_from_the_tables(tmp_path):
    folder = copy_workflow(tmp_path)
    (folder / "paper_figures" / "dummy_scores.py").write_text(DUMMY_FIGURE)
    result = snakemake(folder, "-n", "--configfile", ".test/config/test.yaml")
    assert result.returncode == 0, result.stderr[-3000:]
    assert job_counts(result.stdout)["figure"] == len(FIGURES) + 1
    assert "results/ci-test/figures/dummy_scores.png" in result.stdout
    tables = write_grid(tmp_path / "grid")
    drawn = subprocess.run(
        [
            sys.executable,
            str(folder / "paper_figures" / "dummy_scores.py"),
            "--tables",
            str(tables),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert drawn.returncode == 0, drawn.stderr[-3000:]
    assert (tmp_path / "out" / "dummy_scores.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_a_figure_script_without_a_docstring_stops_the_workflow_naming_it(tmp_path):
    folder = copy_workflow(tmp_path)
    (folder / "paper_figures" / "dummy_scores.py").write_text(DUMMY_FIGURE.split('"""', 2)[2])
    result = snakemake(folder, "-n", "--configfile", ".test/config/test.yaml")
    assert result.returncode != 0
    assert (
        "paper_figures/dummy_scores.py: no docstring; a figure script's docstring is its caption"
        in result.stdout + result.stderr
    )
