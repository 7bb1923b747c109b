"""Fixtures and builders every test may use: a tiny base model and prepared data (built once
per pytest run, once per worker under `make test`), the CI grid (run once for all workers), the
suite's order (the longest test, then the files of slow tests), the settings of a tiny training
cell (`tiny_settings`, `tiny_config`) and a cell's settings file in a results folder
(`write_cell_settings`); the tests by CPU time beside `--durations` (cpu_durations)."""

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from filelock import FileLock
from transformers import AutoModelForCausalLM, AutoTokenizer

from klrl.core.files import read_jsonl
from klrl.objective.kl_config import KLConfig
from klrl.models import built_folder
from klrl.models.tiny_settings import TinyConfig
from klrl.models.tiny import pretrain_tiny
from klrl.core.paths import Layout
from klrl.tasks.data import prepare
from klrl.training.config import TrainConfig
from klrl.core.typed import from_mapping
from workflow_helpers import copy_workflow, snakemake

pytest_plugins = ["cpu_durations"]

# A model small enough to build in a second, its competence checked on 8 problems a task with no
# floor. Its corpus and optimizer settings are spelled out, so a change of the default recipe
# leaves the weights that tests pin (tests/training/test_golden.py) as they are.
TINY_TEST_MODEL = {
    "hidden": 32,
    "layers": 2,
    "heads": 1,
    "intermediate": 64,
    "batch_tokens": 64,
    "warmup": 1,
    "lr": 2e-3,
    "clean_fraction": 0.5,
    "mix": {"arith": 0.7, "arith-long": 0.1, "arith-word": 0.2},
    "check_problems": 8,
    "floor": {},
}
# A tiny cell: a few steps of 4 prompts × 4 samples, no periodic evaluation, checkpoint or collapse detection.
TINY_CELL = {
    "reward": "arithmetic",
    "steps": 2,
    "prompts_per_step": 4,
    "group_size": 4,
    "max_new_tokens": 6,
    "lr": 1e-2,
    "weight_decay": 0.0,
    "eval_every": 0,
    "eval_size": 4,
    "eval_samples": 1,
    "checkpoint_every": 0,
    "collapse_window": 0,
}


def tiny_settings(
    base: Path, data: Path, kl: str = "none", beta: float = 0.0, kl_options: dict | None = None, **overrides
) -> dict:
    """The settings of a tiny training cell (a settings file's plain values) on the model folder
    `base` and the prepared task folder `data`, TINY_CELL with `overrides` on top."""
    kl_settings = {"name": kl, "beta": beta} | (kl_options or {})
    return (
        {
            "kl": kl_settings,
            "base_model": str(base),
            "train_data": str(data / "train.jsonl"),
            "eval_data": str(data / "test.jsonl"),
        }
        | TINY_CELL
        | overrides
    )


def tiny_config(base: Path, data: Path, kl: str = "none", beta: float = 0.0, **overrides) -> TrainConfig:
    """`tiny_settings` as a TrainConfig."""
    return from_mapping(TrainConfig, tiny_settings(base, data, kl, beta, **overrides), "train config")


def trained_records(config: TrainConfig, out: Path) -> list[dict]:
    """Train the cell `config` in `out` (torch's thread count restored after) and return its
    per-step training records (those with a loss; not the final evaluation's)."""
    from klrl.training.record import read_metrics
    from klrl.training.trainer import Trainer

    threads = torch.get_num_threads()
    try:
        Trainer(config, out).run()
    finally:
        torch.set_num_threads(threads)
    return [record for record in read_metrics(out / "metrics.jsonl") if "loss/total" in record]


COLLECTED_ORDER = pytest.StashKey[list[tuple[str, bool]]]()


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """Tests marked `longest` first, then the files holding a `slow` test, then the rest, each
    file's tests together in their own order: `make test` runs the suite on two workers, one test
    file at a time each, in collection order (pytest-xdist: --dist loadfile
    --no-loadscope-reorder). A worker that started a long file last would finish alone; with the
    quick files last, the two workers end within a few seconds of each other. The order is kept
    for `collected_order`: this hook runs before `-m` and `-k` deselect any test."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: (item.get_closest_marker("longest") is None, item.path not in slow_files))
    config.stash[COLLECTED_ORDER] = [(item.nodeid, item.get_closest_marker("slow") is not None) for item in items]


@pytest.fixture
def collected_order(request) -> list[tuple[str, bool]]:
    """Every test this pytest run collected, in the order it runs them, deselected ones included:
    its node id and whether it is marked `slow`."""
    return request.config.stash[COLLECTED_ORDER]


CI_RUN_TABLES = "ci-run-tables"  # beside the CI run's folder: its tables before any test reruns a part


@pytest.fixture(scope="session")
def ci_run(tmp_path_factory) -> Path:
    """.test/config/test.yaml run through Snakemake from nothing (data, tiny base, 2 cells,
    evaluation, tables, figures) once per pytest run: under pytest-xdist the first worker
    to ask runs it in the workers' shared temporary folder and the others wait on its lock. Tests
    may rerun parts of it (tests/test_workflow_runs.py); `ci_run_tables` holds the tables as this
    run wrote them."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # each worker's basetemp is a folder in the run's
    folder, tables, failed = shared / "ci-run", shared / CI_RUN_TABLES, shared / "ci-run.failed"
    with FileLock(shared / "ci-run.lock"):
        if failed.exists():
            pytest.fail(failed.read_text())
        if not tables.is_dir():
            failed.write_text("the CI grid stopped before its end")  # what the other workers see if this one dies
            folder.mkdir()
            result = snakemake(copy_workflow(folder), "--cores", "2", "--configfile", ".test/config/test.yaml")
            if result.returncode != 0:
                failed.write_text(f"the CI grid failed: {result.stderr[-5000:]}")
                pytest.fail(failed.read_text())
            shutil.copytree(folder / "results" / "ci-test" / "tables", tables)
            failed.unlink()
    return folder


@pytest.fixture(scope="session")
def ci_run_tables(ci_run) -> Path:
    """The tables folder of `ci_run` as its grid wrote them (main.csv, scores.csv, ...)."""
    return ci_run.parent / CI_RUN_TABLES


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory) -> Path:
    """A barely trained tiny base (2 steps): a real model folder, fast to load and to train."""
    out = tmp_path_factory.mktemp("base") / "tiny"
    pretrain_tiny(out, TinyConfig(steps=2, **TINY_TEST_MODEL), log_every=0)
    return out


@pytest.fixture(scope="session")
def arith_data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("data") / "arith"
    prepare("arith", out, seed=0, sizes={"train": 64, "test": 16})
    return out


@pytest.fixture(scope="session")
def talkative_base(tiny_base, tmp_path_factory) -> Path:
    """The tiny test base with random weight matrices: its greedy completions are long and varied."""
    model = AutoModelForCausalLM.from_pretrained(tiny_base)
    generator = torch.Generator().manual_seed(0)
    for parameter in model.parameters():
        if parameter.dim() > 1:
            parameter.data = 0.3 * torch.randn(parameter.shape, generator=generator)
    out = tmp_path_factory.mktemp("talkative") / "model"
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_base).save_pretrained(out)
    return out


@pytest.fixture
def talkative_folder(talkative_base, tmp_path) -> Path:
    """A copy of the talkative base that a test may edit."""
    return Path(shutil.copytree(talkative_base, tmp_path / "talkative"))


def records(path: Path) -> list[dict]:
    """The JSON objects of a JSONL file (klrl.core.files.read_jsonl), in file order."""
    return [line.record for line in read_jsonl(path)]


def write_cell_settings(
    root: Path, cell: str, *, kl: str, beta: float, seed: int, lag: int = 0, model: str = "tiny", task: str = "arith"
) -> Path:
    """The settings.json the grid writes for `cell` under the results folder `root` (what
    aggregation reads each cell's model, task, KL configuration, β, lag and seed from)."""
    data = Layout(root).data(task)
    config = TrainConfig(
        base_model=str(built_folder(model)),
        train_data=str(data / "train.jsonl"),
        eval_data=str(data / "test.jsonl"),
        reward="arithmetic",
        model=model,
        task=task,
        kl=KLConfig.from_name(kl, beta=beta),
        async_lag=lag,
        seed=seed,
    )
    path = Layout(root).settings(cell)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config.to_dict()))
    return path
