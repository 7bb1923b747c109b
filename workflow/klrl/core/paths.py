"""Where every file of a run lives: the one place that spells the paths under results/<experiment>/.

The rules (workflow/rules/*.smk, through common.smk's `LAYOUT`) and the code (the grid,
aggregation, evaluation, tracking) both ask `Layout`; a rule's path template is the same call
with a wildcard, `LAYOUT.status("{cell}")`. The names of the files in one cell's train folder
and in an evaluation folder are the constants below.

    results/bases/<model>-<recipe hash>/model/          a base model built here, shared by every
                                                        config with that recipe (klrl.models.recipe)
    results/<experiment>/
      data/<task>/{train,test}.jsonl, manifest.json      prepared data (klrl.tasks.data)
      base/<model>/eval/results.json, samples/<task>.jsonl
      cells/<cell>/train/                                 settings.json, config.yaml, metrics.jsonl, status.json, final/, ...
      cells/<cell>/eval/results.json, samples/<task>.jsonl
      plan.json, plans.jsonl                              the analysis plan (klrl.analysis.preregistration)
      wall_times.jsonl                                    each Snakemake invocation's wall time (klrl.grid.wall_time)
      toy/, tables/, figures/, mlflow/runs.json, logs/<rule>/..., benchmarks/<rule>/...
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# The workflow's files apart from the installed package: what a copy of the workflow elsewhere
# (the tests' grids, the benchmarks' revisions) needs.
WORKFLOW_FILES = (
    "Snakefile",
    "workflow/rules",
    "workflow/schemas",
    "workflow/report",
    "config",
    ".test",  # the tests' configs
    "envs",
    "profiles",
    "paper_figures",
)
RESULTS = Path("results")
BASES = RESULTS / "bases"  # built base models, one folder per recipe, shared by every config (klrl.models.recipe)

# A cell's train folder
SETTINGS = "settings.json"  # the cell's resolved TrainConfig, written by the workflow for the train job
CONFIG = "config.yaml"  # the same, written by the trainer: it names the attempt whose files are there
METRICS = "metrics.jsonl"  # one record per step
STATUS = "status.json"  # completed or diverged, written last
FINAL = "final"  # the trained model
TRAIN_LOCK = "train.lock"  # held by the training process (klrl.core.folder_lock)
RUN_RECORD = "mlflow_run.json"  # the MLflow run of the attempt (klrl.tracking.attempt_runs)
# An evaluation folder
EVAL_RESULTS = "results.json"
SAMPLES = "samples"


def samples_file(results: Path, task: str) -> Path:
    """The per-problem samples of `task` beside an evaluation's results.json."""
    return Path(results).parent / SAMPLES / f"{task}.jsonl"


@dataclass(frozen=True)
class Layout:
    """The paths of one config's run, all under `root` = results/<experiment>."""

    root: Path

    @classmethod
    def of(cls, config: dict) -> Layout:
        """The layout of a workflow config: results/<experiment>, so configs in one checkout never share files.

        >>> Layout.of({"experiment": "ci-test"}).status("tiny__k1-reward__b0.1__on__s0")
        PosixPath('results/ci-test/cells/tiny__k1-reward__b0.1__on__s0/train/status.json')
        """
        return cls(RESULTS / config["experiment"])

    def data(self, task: str) -> Path:
        return self.root / "data" / task

    def manifest(self, task: str) -> Path:
        return self.data(task) / "manifest.json"

    def split(self, task: str, split: str) -> Path:
        return self.data(task) / f"{split}.jsonl"

    def base_eval(self, model: str) -> Path:
        return self.root / "base" / model / "eval" / EVAL_RESULTS

    def cells(self) -> Path:
        return self.root / "cells"

    def train(self, cell: str) -> Path:
        return self.cells() / cell / "train"

    def settings(self, cell: str) -> Path:
        return self.train(cell) / SETTINGS

    def status(self, cell: str) -> Path:
        return self.train(cell) / STATUS

    def metrics(self, cell: str) -> Path:
        return self.train(cell) / METRICS

    def final(self, cell: str) -> Path:
        return self.train(cell) / FINAL

    def cell_eval(self, cell: str) -> Path:
        return self.cells() / cell / "eval" / EVAL_RESULTS

    def toy(self, name: str = "") -> Path:
        return self.root / "toy" / name if name else self.root / "toy"

    def tables(self, name: str = "") -> Path:
        return self.root / "tables" / name if name else self.root / "tables"

    def figures(self, name: str = "") -> Path:
        return self.root / "figures" / name if name else self.root / "figures"

    def plan(self) -> Path:
        """The run's analysis plan with its hash (klrl plan), written before any cell trains."""
        return self.root / "plan.json"

    def plans(self) -> Path:
        """Every plan the workflow recorded for this experiment, one line each (klrl plan)."""
        return self.root / "plans.jsonl"

    def wall_times(self) -> Path:
        """One line per Snakemake invocation that ran jobs: its start, end, jobs and cores (klrl.grid.wall_time)."""
        return self.root / "wall_times.jsonl"

    def runs_file(self) -> Path:
        """The grid's MLflow runs (klrl track-grid)."""
        return self.root / "mlflow" / "runs.json"

    def figures_marker(self) -> Path:
        return self.root / "mlflow" / "figures.txt"

    def log(self, rule: str, name: str = "") -> Path:
        """A job's log: logs/<rule>/<name>.log, or logs/<rule>.log for a rule with one job."""
        return self.root / "logs" / rule / f"{name}.log" if name else self.root / "logs" / f"{rule}.log"

    def benchmark(self, rule: str, name: str = "") -> Path:
        """A job's time and memory (Snakemake's benchmark): benchmarks/<rule>/<name>.tsv, or benchmarks/<rule>.tsv."""
        return self.root / "benchmarks" / rule / f"{name}.tsv" if name else self.root / "benchmarks" / f"{rule}.tsv"
