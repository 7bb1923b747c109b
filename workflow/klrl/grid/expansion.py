"""The experiment grid: a workflow config (config/*.yaml) expanded into cells, checked before any job.

A cell is (model, KL configuration, β, policy mode, seed) within a group; its id, used in every
path, is `<model>__<kl>__b<β>__<on|off>__s<seed>`, e.g. `tiny__k1-reward__b0.1__on__s0`.
Each group of the config is the product of its lists, with its own train overrides, training
task and evaluation tasks:

    groups:
      - name: off-policy
        models: [tiny]
        kl: [none, k1-reward, k3-loss]
        beta: [0.1]
        policy: [off]          # off: async_lag from the group's train settings (≥ 1), or
                               # lag: [2, 8, 16] to make staleness an axis (ids: ...__off-lag8__s0)
        seeds: [0, 1]
        task: arith            # training task; its test split is the in-domain evaluation
        eval_tasks: [arith, arith-long, arith-word]
        train: {async_lag: 4, kl: {value_clamp: 10}}  # overrides of the top-level `train` defaults

The kl `none` cell is made once, at β = 0, whatever the β list. The same cell id from two groups
is an error (it would be one folder with two meanings). Every cell's training settings are built
into a `TrainConfig` here, so a bad value fails when Snakemake loads the config, naming the group;
`Cell.train` holds that config's plain values, which the train job reads back from the JSON file
`settings_json` writes (types survive the trip: tests/grid/test_expansion.py) and aggregation
reads each cell's model, task, KL configuration, β, lag and seed from (`klrl.analysis.tables.cell_tags`).

Three keys exist for overlays that change a grid's scale and its β sweep and nothing else
(config/overlays/cpu-mini.yaml runs the paper's grid in miniature on CPUs with them): `stand_ins`
maps models to the models that run in their place (`{qwen2.5-7b: tiny}`), `train_overrides` is
applied over every group's train section (a group's `steps`, say), and `beta_sweep: smallest`
trains only the smallest β of each group's list; a second config file cannot reach a group's
settings otherwise, because Snakemake replaces lists such as `groups` whole.
"""

from __future__ import annotations

import itertools
import json
import difflib
import re
from dataclasses import dataclass, field

from klrl.models import built_folder, get_base_model
from klrl.tasks import get_task
from klrl.objective.kl_config import KL_OPTIONS
from klrl.core.paths import Layout
from klrl.training.config import TrainConfig
from klrl.core.typed import from_mapping

# TrainConfig keys that the grid sets for each cell (threads and device from the job's
# resources); the config's `train` sections may not. Of `kl`, the grid sets the name and β;
# train sections may set its options (`kl: {value_clamp: 10}`).
GRID_KEYS = (
    "base_model",
    "base_revision",
    "stop_tokens",
    "train_data",
    "eval_data",
    "reward",
    "model",
    "task",
    "seed",
    "threads",
    "device",
)
CELL_ID = re.compile(
    r"(?P<model>[a-z0-9.\-]+)__(?P<kl>[a-z0-9\-]+)__b(?P<beta>[0-9.e\-]+)__(?P<policy>on|off)(?:-lag(?P<lag>\d+))?__s(?P<seed>\d+)"
)


def cell_id(model: str, kl: str, beta: float, policy: str, seed: int, lag: int | None = None) -> str:
    """The cell's id; the lag is part of it when the group makes staleness an axis (`lag: [...]`).

    >>> cell_id("tiny", "k1-reward", 0.1, "on", 0), cell_id("tiny", "none", 0, "off", 1, lag=8)
    ('tiny__k1-reward__b0.1__on__s0', 'tiny__none__b0__off-lag8__s1')
    """
    return f"{model}__{kl}__b{beta:g}__{policy}{'' if lag is None else f'-lag{lag}'}__s{seed}"


def parse_cell_id(text: str) -> dict:
    """The tags encoded in a cell id (lag: 0 on-policy, None when the id does not say it).

    >>> parse_cell_id("qwen2.5-7b__k3-loss__b0.005__off__s1")
    {'model': 'qwen2.5-7b', 'kl': 'k3-loss', 'beta': 0.005, 'policy': 'off', 'lag': None, 'seed': 1}
    >>> parse_cell_id("tiny__none__b0__off-lag8__s1")["lag"]
    8
    """
    match = CELL_ID.fullmatch(text)
    if not match:
        raise ValueError(f"{text!r} is not a cell id (<model>__<kl>__b<beta>__<on|off[-lag<k>]>__s<seed>)")
    tags = match.groupdict()
    lag = 0 if tags["policy"] == "on" else None if tags["lag"] is None else int(tags["lag"])
    return {
        "model": tags["model"],
        "kl": tags["kl"],
        "beta": float(tags["beta"]),
        "policy": tags["policy"],
        "lag": lag,
        "seed": int(tags["seed"]),
    }


def model_path(model: str, config: dict) -> str:
    """Where a base model is loaded from: the folder its recipe is built into (results/bases/,
    shared by every config with that recipe: klrl.models.built_folder), or its Hub id (or local folder)."""
    base = get_base_model(model, config.get("models"))
    return base.hub_id if base.build == "hub" else str(built_folder(model, config.get("models")))


JOB_DEFAULTS = {"threads": 1, "mem_mb": 4000, "runtime": 60, "gpus": 0}


def job_resources(config: dict, model: str) -> dict:
    """Threads (of the whole job), memory (MB), runtime (minutes), GPUs and training processes of a
    training job of `model`. `processes` (one per GPU unless set) is the number of data-parallel
    training processes: set it without GPUs to run FSDP on CPU processes."""
    resources = JOB_DEFAULTS | config.get("jobs", {}) | config.get("models", {}).get(model, {}).get("jobs", {})
    return {"processes": max(1, resources["gpus"])} | resources


def eval_job_resources(config: dict, model: str) -> dict:
    """The same of an evaluation job of `model` (one process): one GPU where its training job has
    any, and the threads, memory and runtime of `evaluation.jobs` where set (else the training job's).

    >>> config = {"jobs": {"threads": 16, "mem_mb": 400000, "runtime": 2880, "gpus": 8}}
    >>> eval_job_resources(config | {"evaluation": {"jobs": {"mem_mb": 64000, "runtime": 240}}}, "qwen2.5-7b")
    {'threads': 16, 'mem_mb': 64000, 'runtime': 240, 'gpus': 1}
    """
    train = job_resources(config, model)
    train.pop("processes")
    return train | {"gpus": min(1, train["gpus"])} | config.get("evaluation", {}).get("jobs", {})


def train_launcher(processes: int) -> str:
    """The command that starts `klrl train` with `processes` data-parallel processes: torchrun
    (FSDP, klrl.training.distributed) when there are several.

    >>> train_launcher(8)
    'torchrun --standalone --nproc_per_node 8 -m klrl'
    >>> train_launcher(1)
    'python -m klrl'
    """
    return f"torchrun --standalone --nproc_per_node {processes} -m klrl" if processes > 1 else "python -m klrl"


def settings_json(cell: Cell) -> str:
    """The cell's resolved TrainConfig as the JSON text of its settings file (`klrl train --config`)."""
    return json.dumps(cell.train, sort_keys=True)


@dataclass(frozen=True)
class Cell:
    id: str
    group: str
    model: str
    kl: str
    beta: float
    policy: str
    seed: int
    task: str
    eval_tasks: tuple[str, ...]
    train: dict = field(hash=False, compare=False)  # the resolved TrainConfig values


def _train_settings(
    config: dict, group: dict, model: str, kl: str, beta: float, policy: str, seed: int, lag: int | None
) -> dict:
    task = get_task(group["task"])
    layout = Layout.of(config)
    sections = [config.get("train", {}), group.get("train", {}), config.get("train_overrides", {})]
    kl_options = {key: value for section in sections for key, value in section.get("kl", {}).items()}
    settings = {key: value for section in sections for key, value in section.items()}
    resources = job_resources(config, model)
    base = get_base_model(model, config.get("models"))
    settings |= {
        "base_model": model_path(model, config),
        "base_revision": base.revision,
        "stop_tokens": list(base.stop_tokens),
        "train_data": str(layout.split(task.name, "train")),
        "eval_data": str(layout.split(task.name, "test")),
        "reward": task.reward,
        "model": model,
        "task": task.name,
        "kl": kl_options | {"name": kl, "beta": beta},
        "seed": seed,
        "threads": max(1, resources["threads"] // resources["processes"]),  # per process
        "device": "cuda" if resources["gpus"] else "cpu",
    }
    prompts = settings.get("prompts_per_step", TrainConfig.prompts_per_step)
    if resources["processes"] > 1 and prompts % resources["processes"]:
        raise ValueError(
            f"group {group['name']!r}: prompts_per_step {prompts} is not a multiple of the {resources['processes']} training processes of a {model} job"
        )
    if policy == "on":
        settings["async_lag"] = 0
    elif lag is not None:
        settings["async_lag"] = lag
    elif settings.get("async_lag", 0) < 1:
        raise ValueError(
            f"group {group['name']!r}: policy 'off' needs train.async_lag ≥ 1 or a lag list (the actor's lag in steps)"
        )
    return settings


def expand_grid(config: dict) -> dict[str, Cell]:
    """Every cell of every group, by id, in config order."""
    for scope, section in [
        ("train", config.get("train", {})),
        ("train_overrides", config.get("train_overrides", {})),
    ] + [(f"groups[{g['name']}].train", g.get("train", {})) for g in config["groups"]]:
        taken = sorted(set(section) & set(GRID_KEYS)) + sorted(set(section.get("kl", {})) - set(KL_OPTIONS))
        if taken:
            raise ValueError(f"{scope}: {taken[0]!r} is set by the grid, not in a train section")
    stand_ins = config.get("stand_ins", {})
    smallest_beta = config.get("beta_sweep", "all") == "smallest"
    cells: dict[str, Cell] = {}
    for group in config["groups"]:
        get_task(group["task"])
        for name in group["eval_tasks"]:
            get_task(name)
        models = list(dict.fromkeys(stand_ins.get(model, model) for model in group["models"]))
        for model in models:
            try:
                get_base_model(model, config.get("models"))
            except ValueError as error:
                raise ValueError(f"group {group['name']!r}: {error}") from None
        if "lag" in group and (group["policy"] != ["off"] or "async_lag" in group.get("train", {})):
            raise ValueError(f"group {group['name']!r}: a lag list needs policy [off] and no train.async_lag")
        modes = [("on", None)] * ("on" in group["policy"]) + [("off", lag) for lag in group.get("lag", [None])] * (
            "off" in group["policy"]
        )
        betas = [min(group["beta"])] if smallest_beta else group["beta"]
        product = itertools.product(models, group["kl"], betas, modes, group["seeds"])
        for model, kl, beta, (policy, lag), seed in product:
            beta = 0.0 if kl == "none" else float(beta)
            cid = cell_id(model, kl, beta, policy, seed, lag)
            if cid in cells:
                if cells[cid].group == group["name"]:
                    continue  # kl none across several β: one cell
                raise ValueError(
                    f"cell {cid} is in groups {cells[cid].group!r} and {group['name']!r}; give one of them other values"
                )
            settings = _train_settings(config, group, model, kl, beta, policy, seed, lag)
            try:
                resolved = from_mapping(TrainConfig, settings, "train config").to_dict()
            except ValueError as error:
                raise ValueError(f"group {group['name']!r}, cell {cid}: {error}") from None
            cells[cid] = Cell(
                cid, group["name"], model, kl, beta, policy, seed, group["task"], tuple(group["eval_tasks"]), resolved
            )
    return cells


def base_eval_tasks(cells: dict[str, Cell]) -> dict[str, list[str]]:
    """Per base model, every task any of its cells is evaluated on (the base is evaluated once on all)."""
    tasks: dict[str, list[str]] = {}
    for cell in cells.values():
        known = tasks.setdefault(cell.model, [])
        known += [task for task in cell.eval_tasks if task not in known]
    return tasks


def used_tasks(cells: dict[str, Cell]) -> list[str]:
    """Every task whose data some cell trains or evaluates on."""
    names: list[str] = []
    for cell in cells.values():
        names += [task for task in (cell.task, *cell.eval_tasks) if task not in names]
    return names


def unknown_cell_message(name: str, cells) -> str:
    """One line saying that `name` is no cell of the grid, with its closest cell ids.

    >>> print(unknown_cell_message("tiny__k1-reward__b0.1__on__s7", ["tiny__k1-reward__b0.1__on__s0", "qwen2.5-7b__k3-loss__b1__off__s0"]))
    'tiny__k1-reward__b0.1__on__s7' is not a cell of this config; closest: tiny__k1-reward__b0.1__on__s0 (`python -m klrl cells --config FILE` lists them all)
    """
    close = difflib.get_close_matches(name, list(cells), n=3, cutoff=0.6)
    hint = f"closest: {', '.join(close)}" if close else "no cell id is close"
    return f"{name!r} is not a cell of this config; {hint} (`python -m klrl cells --config FILE` lists them all)"
