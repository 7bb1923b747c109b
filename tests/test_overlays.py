"""Config overlays (config/overlays/*.yaml) change a grid's scale and its β sweep and nothing else;
the CPU miniature of the paper's grid (cpu-mini.yaml) runs every code path of it, each named here."""

import copy
import fnmatch
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config

from klrl.grid.expansion import expand_grid, job_resources
from workflow_helpers import load_config

ROOT = Path(__file__).resolve().parents[1]

# Dotted key paths an overlay may set: sizes, steps (and the lag, which a cell's steps bound),
# token limits, models' stand-ins and resources, backends that exist on a CPU, the β sweep
# (a number in the loss, not a code path) and the experiment name that keeps its outputs apart.
SCALE_AND_BETA_KEYS = (
    "experiment",
    "beta_sweep",
    "stand_ins.*",
    "jobs.*",
    "models.*.jobs.*",
    "models.*.pretrain.*",
    "models.*.convert.*",
    "data.*.train_size",
    "data.*.test_size",
    "data.*.source",
    "evaluation.samples",
    "evaluation.max_new_tokens",
    "evaluation.batch_size",
    "evaluation.backend",
    "evaluation.limit",
    "evaluation.mechanism_prompts",
    "evaluation.mechanism_samples",
    "train.generation_backend",
    "train.max_new_tokens",
    "train.eval_size",
    "train.eval_samples",
    "train_overrides.steps",
    "train_overrides.async_lag",
    "train_overrides.prompts_per_step",
    "train_overrides.group_size",
    "train_overrides.micro_batch_size",
    "train_overrides.checkpoint_every",
    "train_overrides.eval_every",
)


def _paths(mapping: dict, prefix: str = "") -> list[str]:
    paths = []
    for key, value in mapping.items():
        path = f"{prefix}{key}"
        paths += _paths(value, path + ".") if isinstance(value, dict) and value else [path]
    return paths


OVERLAYS = sorted(path.name for path in (ROOT / "config" / "overlays").glob("*.yaml"))


@pytest.mark.parametrize("name", OVERLAYS)
def test_an_overlay_sets_only_scale_and_beta_sweep_keys(name):
    overlay = yaml.safe_load((ROOT / "config" / "overlays" / name).read_text())
    outside = [path for path in _paths(overlay) if not any(fnmatch.fnmatch(path, p) for p in SCALE_AND_BETA_KEYS)]
    assert not outside, f"{name} sets keys that are neither scale nor the β sweep: {outside}"


def _mini() -> tuple[dict, dict]:
    config = load_config("paper", overlay="cpu-mini")
    return config, expand_grid(config)


def test_the_cpu_miniature_trains_the_smallest_beta_of_each_group_and_every_other_axis():
    """The paper's cells with their models' stand-ins and each group's smallest β (the kl `none`
    cells at β 0): one cell per group, KL configuration and policy mode, 18 in all."""
    paper, (mini, mini_cells) = load_config("paper"), _mini()
    smallest = {group["name"]: min(group["beta"]) for group in paper["groups"]}
    expected = {
        (c.group, mini["stand_ins"].get(c.model, c.model), c.kl, 0.0 if c.kl == "none" else smallest[c.group])
        + (c.policy, c.seed, c.task, c.eval_tasks)
        for c in expand_grid(paper).values()
    }
    got = [(c.group, c.model, c.kl, c.beta, c.policy, c.seed, c.task, c.eval_tasks) for c in mini_cells.values()]
    assert len(got) == len(set(got)) == 18 and set(got) == expected


def test_the_cpu_miniature_keeps_each_cells_recipe_at_a_smaller_scale():
    paper_cells, (mini, mini_cells) = expand_grid(load_config("paper")), _mini()
    for cell in mini_cells.values():
        original = next(
            c
            for c in paper_cells.values()
            if (c.group, c.kl, c.policy, c.seed) == (cell.group, cell.kl, cell.policy, cell.seed)
        )
        same = (
            "advantage",
            "ratio_clamp",
            "lr",
            "loss_aggregation",
            "mixed_precision",
            "activation_checkpointing",
        )
        assert {key: cell.train[key] for key in same} == {key: original.train[key] for key in same}
        assert {**cell.train["kl"], "beta": None} == {**original.train["kl"], "beta": None}  # all but β
        # the lag scaled with the steps: off-policy still, never longer than the cell
        assert (cell.train["async_lag"] > 0) == (original.train["async_lag"] > 0)
        assert cell.train["async_lag"] <= cell.train["steps"] < original.train["steps"]
        assert job_resources(mini, cell.model)["processes"] == 2 and cell.train["device"] == "cpu"
        assert cell.train["micro_batch_size"] < cell.train["prompts_per_step"] * cell.train["group_size"] // 2


MMLU = ("mmlu-college-physics", "mmlu-college-chemistry", "mmlu-college-biology")
PAPER_GROUPS = [group["name"] for group in load_config("paper")["groups"]]
# The paper's KL configurations by policy mode, and this project's prefix-IS extension.
KL_CONFIGURATIONS = [
    ("on", kl) for kl in ("none", "k1-reward", "k1-loss", "k3-reward", "k3-loss", "k1-both", "k3-both")
] + [("off", kl) for kl in ("none", "k1-reward", "k1-loss", "k3-reward", "k3-loss", "k1-reward-prefixis")]


def _cells_where(**train):
    """A check: some cell's train settings have these values."""
    return lambda config, cells: any(all(c.train[k] == v for k, v in train.items()) for c in cells.values())


def _every_cell(check):
    return lambda config, cells: all(check(config, c) for c in cells.values())


# Each code path the miniature runs (besides every group and every KL configuration, below):
# name → a check of the miniature's config and cells: their settings as expanded (below), and as its
# train jobs ran with them (tests/test_paper_miniature.py).
CODE_PATHS = {
    "on-policy: RLOO advantage, no lag": _cells_where(async_lag=0, advantage="rloo", ratio_clamp=None),
    "off-policy: an actor a step behind, group-mean advantage, IS ratio clamp 8, KL value clamp 10": lambda config, cells: (
        any(
            c.train["async_lag"] >= 1
            and (c.train["advantage"], c.train["ratio_clamp"], c.train["kl"]["value_clamp"])
            == ("group-mean", 8.0, 10.0)
            for c in cells.values()
        )
    ),
    "MATH training, evaluated on MATH and the three MMLU subjects (offline fixture loaders)": lambda config, cells: (
        any(c.task == "math" and c.eval_tasks == ("math", *MMLU) for c in cells.values())
        and all(config["data"][task]["source"] == "fixture" for task in ("math", *MMLU))
    ),
    "Countdown training and evaluation": lambda config, cells: any(
        c.task == "countdown" and c.eval_tasks == ("countdown",) for c in cells.values()
    ),
    "a base model pretrained from its recipe (tiny)": lambda config, cells: (
        any(c.model == "tiny" for c in cells.values()) and "pretrain" in config["models"]["tiny"]
    ),
    "a chat model converted and cut to 2 layers (SmolLM2-135M, turns ending with <|im_end|>)": lambda config, cells: (
        any(c.model == "smollm2-135m" for c in cells.values())
        and config["models"]["smollm2-135m"]["convert"] == {"layers": 2}
    ),
    "torchrun with 2 data-parallel processes on CPU (FSDP over gloo)": _every_cell(
        lambda config, c: job_resources(config, c.model)["processes"] == 2 and c.train["device"] == "cpu"
    ),
    "bf16 compute over fp32 master weights": _every_cell(lambda config, c: c.train["mixed_precision"] == "bf16"),
    "activation checkpointing": _every_cell(lambda config, c: c.train["activation_checkpointing"]),
    "micro-batches: a process's rows in several forward/backward passes": _every_cell(
        lambda config, c: c.train["micro_batch_size"] < c.train["prompts_per_step"] * c.train["group_size"] // 2
    ),
    "a checkpoint written before a cell's last step": _every_cell(
        lambda config, c: c.train["checkpoint_every"] < c.train["steps"]
    ),
    "rollouts and lm-eval on the Hugging Face backend": lambda config, cells: (
        config["evaluation"]["backend"] == "hf" and all(c.train["generation_backend"] == "hf" for c in cells.values())
    ),
    "MLflow tracking of the grid": lambda config, cells: config["tracking"]["enabled"],
}


@pytest.mark.parametrize("name", CODE_PATHS)
def test_the_cpu_miniature_runs_the_code_path(name):
    config, cells = _mini()
    assert CODE_PATHS[name](config, cells), f"config/overlays/cpu-mini.yaml no longer runs: {name}"


@pytest.mark.parametrize("group", PAPER_GROUPS)
def test_the_cpu_miniature_trains_each_group_of_the_paper_grid(group):
    assert group in {cell.group for cell in _mini()[1].values()}


@pytest.mark.parametrize(
    ("policy", "kl"), KL_CONFIGURATIONS, ids=[f"{policy}-policy {kl}" for policy, kl in KL_CONFIGURATIONS]
)
def test_the_cpu_miniature_trains_each_kl_configuration_in_each_policy_mode(policy, kl):
    assert (policy, kl) in {(cell.policy, cell.kl) for cell in _mini()[1].values()}


@pytest.mark.parametrize(("name", "pilot"), [("smollm2", "smollm2.yaml"), ("mechanism", "mechanism.yaml")])
def test_a_pilot_trains_the_studys_recipe_on_seeds_of_its_own(name, pilot):
    """config/pilots/smollm2.yaml sized the SmolLM2 study, mechanism.yaml the mechanism study: each
    of their cells has the settings of the study's cells of its policy but for the KL configuration
    (β included), the steps and the seed, and no seed of it is one of the study's (the study's
    analysis sees none of the data it was sized from)."""
    study = load_config(name)
    layered = copy.deepcopy(study)  # update_config merges into nested sections in place
    update_config(layered, yaml.safe_load((ROOT / "config" / "pilots" / pilot).read_text()))
    study_cells, pilot_cells = expand_grid(study), expand_grid(layered)
    assert not {c.seed for c in pilot_cells.values()} & {c.seed for c in study_cells.values()}
    for cell in pilot_cells.values():
        twin = next(c for c in study_cells.values() if c.train["async_lag"] == cell.train["async_lag"])
        differ = {key for key in cell.train if cell.train[key] != twin.train[key]}
        assert differ <= {"kl", "steps", "seed", "train_data", "eval_data"}, (cell.id, differ)
