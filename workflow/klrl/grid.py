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
        policy: [off]          # off: async_lag from the group's train settings (≥ 1)
        seeds: [0, 1]
        task: arith            # training task; its test split is the in-domain evaluation
        eval_tasks: [arith, arith-long, arith-word]
        train: {async_lag: 4}  # overrides of the top-level `train` defaults

The kl `none` cell is made once, at β = 0, whatever the β list. The same cell id from two groups
is an error (it would be one folder with two meanings). Every cell's training settings are built
into a `TrainConfig` here, so a bad value fails when Snakemake loads the config, naming the group.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

from klrl.models import get_base_model
from klrl.tasks import get_task
from klrl.training.config import TrainConfig

RESULTS = Path("results")
# TrainConfig keys that the grid sets for each cell (threads and device from the job's
# resources); the config's `train` sections may not.
GRID_KEYS = ("base_model", "train_data", "eval_data", "reward", "kl", "beta", "seed", "threads", "device")
CELL_ID = re.compile(r"(?P<model>[a-z0-9.\-]+)__(?P<kl>[a-z0-9\-]+)__b(?P<beta>[0-9.e\-]+)__(?P<policy>on|off)__s(?P<seed>\d+)")


def cell_id(model: str, kl: str, beta: float, policy: str, seed: int) -> str:
    """The cell's id.

    >>> cell_id("tiny", "k1-reward", 0.1, "on", 0)
    'tiny__k1-reward__b0.1__on__s0'
    """
    return f"{model}__{kl}__b{beta:g}__{policy}__s{seed}"


def parse_cell_id(text: str) -> dict:
    """The tags encoded in a cell id.

    >>> parse_cell_id("qwen2.5-7b__k3-loss__b0.005__off__s1")
    {'model': 'qwen2.5-7b', 'kl': 'k3-loss', 'beta': 0.005, 'policy': 'off', 'seed': 1}
    """
    match = CELL_ID.fullmatch(text)
    if not match:
        raise ValueError(f"{text!r} is not a cell id (<model>__<kl>__b<beta>__<on|off>__s<seed>)")
    tags = match.groupdict()
    return tags | {"beta": float(tags["beta"]), "seed": int(tags["seed"])}


def model_path(model: str) -> str:
    """Where a base model is loaded from: its folder under results/base, or its Hub id."""
    base = get_base_model(model)
    return base.hub_id if base.build == "hub" else str(RESULTS / "base" / model / "model")


JOB_DEFAULTS = {"threads": 1, "mem_mb": 4000, "runtime": 60, "gpus": 0}


def job_resources(config: dict, model: str) -> dict:
    """Threads, memory (MB), runtime (minutes) and GPUs of a training job of `model`."""
    return JOB_DEFAULTS | config.get("jobs", {}) | config.get("models", {}).get(model, {}).get("jobs", {})


def eval_job_resources(config: dict, model: str) -> dict:
    """The same of an evaluation job of `model`: one GPU where its training job has any, and the
    threads, memory and runtime of `evaluation.jobs` where set (else the training job's).

    >>> config = {"jobs": {"threads": 16, "mem_mb": 400000, "runtime": 2880, "gpus": 8}}
    >>> eval_job_resources(config | {"evaluation": {"jobs": {"mem_mb": 64000, "runtime": 240}}}, "qwen2.5-7b")
    {'threads': 16, 'mem_mb': 64000, 'runtime': 240, 'gpus': 1}
    """
    train = job_resources(config, model)
    return train | {"gpus": min(1, train["gpus"])} | config.get("evaluation", {}).get("jobs", {})


def train_launcher(gpus: int) -> str:
    """The command that starts `klrl train` on a job with `gpus` GPUs: torchrun with one process
    per GPU (FSDP data parallelism, klrl.training.distributed) when there are several.

    >>> train_launcher(8)
    'torchrun --standalone --nproc_per_node 8 -m klrl'
    >>> train_launcher(1), train_launcher(0)
    ('python -m klrl', 'python -m klrl')
    """
    return f"torchrun --standalone --nproc_per_node {gpus} -m klrl" if gpus > 1 else "python -m klrl"


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

    @property
    def folder(self) -> Path:
        return RESULTS / "cells" / self.id

    def tags(self) -> dict[str, str]:
        return {
            "cell": self.id, "group": self.group, "model": self.model, "kl": self.kl,
            "beta": f"{self.beta:g}", "policy": self.policy, "seed": str(self.seed),
        }


def _train_settings(config: dict, group: dict, model: str, kl: str, beta: float, policy: str, seed: int) -> dict:
    task = get_task(group["task"])
    data = RESULTS / "data" / task.name
    settings = dict(config.get("train", {})) | dict(group.get("train", {}))
    resources = job_resources(config, model)
    settings |= {
        "base_model": model_path(model),
        "train_data": str(data / "train.jsonl"),
        "eval_data": str(data / "test.jsonl"),
        "reward": task.reward,
        "kl": kl,
        "beta": beta,
        "seed": seed,
        "threads": resources["threads"],
        "device": "cuda" if resources["gpus"] else "cpu",
    }
    prompts = settings.get("prompts_per_step", TrainConfig.prompts_per_step)
    if resources["gpus"] > 1 and prompts % resources["gpus"]:
        raise ValueError(f"group {group['name']!r}: prompts_per_step {prompts} is not a multiple of the {resources['gpus']} GPUs of a {model} job")
    if policy == "on":
        settings["async_lag"] = 0
    elif settings.get("async_lag", 0) < 1:
        raise ValueError(f"group {group['name']!r}: policy 'off' needs train.async_lag ≥ 1 (the actor's lag in steps)")
    return settings


def expand_grid(config: dict) -> dict[str, Cell]:
    """Every cell of every group, by id, in config order."""
    for scope, section in [("train", config.get("train", {}))] + [
        (f"groups[{g['name']}].train", g.get("train", {})) for g in config["groups"]
    ]:
        taken = sorted(set(section) & set(GRID_KEYS))
        if taken:
            raise ValueError(f"{scope}: {taken[0]!r} is set by the grid, not in a train section")
    cells: dict[str, Cell] = {}
    for group in config["groups"]:
        get_task(group["task"])
        for name in group["eval_tasks"]:
            get_task(name)
        product = itertools.product(group["models"], group["kl"], group["beta"], group["policy"], group["seeds"])
        for model, kl, beta, policy, seed in product:
            beta = 0.0 if kl == "none" else float(beta)
            cid = cell_id(model, kl, beta, policy, seed)
            if cid in cells:
                if cells[cid].group == group["name"]:
                    continue  # kl none across several β: one cell
                raise ValueError(f"cell {cid} is in groups {cells[cid].group!r} and {group['name']!r}; give one of them other values")
            settings = _train_settings(config, group, model, kl, beta, policy, seed)
            try:
                TrainConfig(**settings)
            except (TypeError, ValueError) as error:
                raise ValueError(f"group {group['name']!r}, cell {cid}: {error}") from None
            cells[cid] = Cell(cid, group["name"], model, kl, beta, policy, seed, group["task"], tuple(group["eval_tasks"]), settings)
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
