"""Config overlays (config/overlays/*.yaml) change a grid's scale and nothing else."""

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
# token limits, models' stand-ins and resources, backends that exist on a CPU, and the
# experiment name that keeps its outputs apart.
SCALE_KEYS = (
    "experiment",
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


def _grid_axes(cells) -> dict[str, set]:
    """Per group, the (KL configuration, β, policy, seed, task, evaluation tasks) it runs."""
    axes: dict[str, set] = {}
    for cell in cells.values():
        axes.setdefault(cell.group, set()).add((cell.kl, cell.beta, cell.policy, cell.seed, cell.task, cell.eval_tasks))
    return axes


OVERLAYS = sorted(path.name for path in (ROOT / "config" / "overlays").glob("*.yaml"))


@pytest.mark.parametrize("name", OVERLAYS)
def test_an_overlay_sets_only_scale_keys(name):
    overlay = yaml.safe_load((ROOT / "config" / "overlays" / name).read_text())
    outside = [path for path in _paths(overlay) if not any(fnmatch.fnmatch(path, pattern) for pattern in SCALE_KEYS)]
    assert not outside, f"{name} sets keys that are not scale: {outside}"


def test_the_cpu_miniature_keeps_every_group_and_axis_of_the_paper_grid():
    mini = load_config("paper", overlay="cpu-mini")
    paper_cells, mini_cells = expand_grid(load_config("paper")), expand_grid(mini)
    assert _grid_axes(mini_cells) == _grid_axes(paper_cells)
    for cell in mini_cells.values():
        original = next(
            c
            for c in paper_cells.values()
            if (c.group, c.kl, c.beta, c.seed) == (cell.group, cell.kl, cell.beta, cell.seed)
        )
        same = (
            "kl",
            "advantage",
            "ratio_clamp",
            "lr",
            "loss_aggregation",
            "mixed_precision",
            "activation_checkpointing",
        )
        assert {key: cell.train[key] for key in same} == {key: original.train[key] for key in same}
        # the lag scaled with the steps: off-policy still, never longer than the cell
        assert (cell.train["async_lag"] > 0) == (original.train["async_lag"] > 0)
        assert cell.train["async_lag"] <= cell.train["steps"] < original.train["steps"]
        assert job_resources(mini, cell.model)["processes"] == 2 and cell.train["device"] == "cpu"
        assert cell.train["micro_batch_size"] < cell.train["prompts_per_step"] * cell.train["group_size"] // 2


@pytest.mark.parametrize(
    ("name", "pilot"), [("smollm2", "smollm2.yaml"), ("smollm2", "smollm2-k3.yaml"), ("mechanism", "mechanism.yaml")]
)
def test_a_pilot_trains_the_studys_recipe_on_seeds_of_its_own(name, pilot):
    """config/pilots/smollm2.yaml sized the SmolLM2 study, smollm2-k3.yaml piloted a row it could
    not reach, mechanism.yaml sized the mechanism study: each of their cells has the settings of
    the study's cells of its policy but for the KL configuration (β included), the steps and the
    seed, and no seed of it is one of the study's (the study's analysis sees none of the data it
    was sized from)."""
    study = load_config(name)
    layered = copy.deepcopy(study)  # update_config merges into nested sections in place
    update_config(layered, yaml.safe_load((ROOT / "config" / "pilots" / pilot).read_text()))
    study_cells, pilot_cells = expand_grid(study), expand_grid(layered)
    assert not {c.seed for c in pilot_cells.values()} & {c.seed for c in study_cells.values()}
    for cell in pilot_cells.values():
        twin = next(c for c in study_cells.values() if c.train["async_lag"] == cell.train["async_lag"])
        differ = {key for key in cell.train if cell.train[key] != twin.train[key]}
        assert differ <= {"kl", "steps", "seed", "train_data", "eval_data"}, (cell.id, differ)
