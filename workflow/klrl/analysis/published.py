"""A run's published tables: what the blocks of docs/results.md are computed from, kept in the repository
(docs/results/<experiment>/) so the blocks regenerate without the run's files or a re-run.

`publish` writes, from a run's results folder and its tables (klrl.analysis.tables):
    seeds.csv               per cell × evaluation task, in the run's order: the cell's tags, its
                            training task, status and step, whether it collapsed (in domain,
                            klrl.analysis.verdicts), the task and its pass@1 (a cell never
                            evaluated: one row, task empty)
                            and the final policy's attained KL and objective
                            (klrl.analysis.mechanism_claims; empty where not measured)
    per_problem/TASK.csv.gz every cell's per-problem pass@1 on TASK (rows: cells, then each base
                            model as `base:MODEL`; columns: problem ids), gzip without a time stamp
    provenance.csv, plan.json, table1.md, table2.md, paper_comparison.md
                            copied from the tables (plan.json: regenerating says whether the
                            code of the moment still analyses the cells by the recorded plan) (what per-seed scores cannot give back: the
                            commits and dates of the cells, the plans, the training curves' tables)
    run.json                the config the run used and its run time
`PublishedResults` reads them back with the interface klrl.analysis.verdicts and
klrl.analysis.tables.main_rows read a results folder through, so the claims, variance and main
tables are computed again from the published scores by the code of the moment (`regenerate`).
"""

from __future__ import annotations

import gzip
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from klrl.analysis.preregistration import declared_not_testable, declared_sizes, plan_hash, plan_of
from klrl.analysis.tables import CELL_TAGS, main_rows, write_table
from klrl.analysis.claim_table import claim_frames
from klrl.analysis.verdicts import VARIANCE_COLUMNS, ScoreIndex, variance_rows

COPIED = ("provenance.csv", "plan.json", "table1.md", "table2.md", "paper_comparison.md")
MECHANISM_MEASURES = ("kl_reverse", "objective")  # the final policy's, klrl.analysis.mechanism_claims
SEEDS_COLUMNS = (
    "cell",
    *CELL_TAGS,
    "training_task",
    "status",
    "step",
    "collapsed",
    "task",
    "pass@1",
    *MECHANISM_MEASURES,
)
BASE = "base:"


def publish(results, tables: Path, out: Path, config: str, run_time: str) -> None:
    """Write `results`' (klrl.analysis.tables.Results) published tables to `out`."""
    missing = [name for name in COPIED if not (tables / name).is_file()]
    if missing:
        raise ValueError(f"{tables}: no {', '.join(missing)} (run `klrl aggregate` first)")
    index = ScoreIndex(results)
    rows, per_task = [], {}
    for cell, tags in results.cells.items():
        key = (tags["kl"], tags["beta"], tags["policy"], tags["lag"])
        status = results.status(cell)
        head = {"cell": cell, **tags, "training_task": results.training_task(cell)}
        head |= {"status": status["status"], "step": status["step"]}
        head["collapsed"] = index.collapsed[(tags["model"], key)][tags["seed"]]
        measured = results.mechanism(cell) or {}
        head |= {measure: measured.get(measure, np.nan) for measure in MECHANISM_MEASURES}
        tasks = results.evaluation(cell)["tasks"]
        for task in tasks or [None]:
            scores = None if task is None else results.per_problem(cell, task)
            if scores is not None:
                per_task.setdefault(task, {})[cell] = scores
            rows.append(head | {"task": task, "pass@1": np.nan if scores is None else float(scores.mean())})
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=SEEDS_COLUMNS).to_csv(out / "seeds.csv", index=False)
    (out / "per_problem").mkdir(exist_ok=True)
    models = dict.fromkeys(tags["model"] for tags in results.cells.values())
    for task, cells in per_task.items():
        for model in models:
            base = results.base_per_problem(model, task)
            if base is not None:
                cells[BASE + model] = base
        frame = pd.DataFrame(cells).T
        with gzip.GzipFile(out / "per_problem" / f"{task}.csv.gz", "wb", mtime=0) as file:
            file.write(frame.to_csv(index_label="cell").encode())
    for name in COPIED:
        shutil.copy(tables / name, out / name)
    (out / "run.json").write_text(json.dumps({"config": config, "run_time": run_time}, indent=2) + "\n")


class PublishedResults:
    """A run's published tables, read as klrl.analysis.verdicts and main_rows read a results folder."""

    def __init__(self, folder: Path) -> None:
        if not (folder / "seeds.csv").is_file():
            raise ValueError(f"{folder}: no seeds.csv (publish a run's tables with `klrl readme-results --publish`)")
        self.folder = folder
        seeds = pd.read_csv(folder / "seeds.csv", dtype={"task": str, "training_task": str}, keep_default_na=False)
        seeds = seeds.replace({"": None})
        self.per_task: dict[str, pd.DataFrame] = {}
        for path in sorted((folder / "per_problem").glob("*.csv.gz")):
            with gzip.open(path, "rb") as file:
                frame = pd.read_csv(io.BytesIO(file.read()), index_col="cell")
            self.per_task[path.name.removesuffix(".csv.gz")] = frame
        self.cells, self._rows = {}, {}
        for cell, group in seeds.groupby("cell", sort=False):
            first = group.iloc[0]
            self.cells[cell] = {
                "model": first["model"],
                "kl": first["kl"],
                "beta": float(first["beta"]),
                "policy": first["policy"],
                "lag": int(first["lag"]),
                "seed": int(first["seed"]),
            }
            self._rows[cell] = group

    def status(self, cell: str) -> dict:
        first = self._rows[cell].iloc[0]
        step = first["step"]
        return {"status": first["status"], "step": None if step in (None, "") else int(float(step))}

    def training_task(self, cell: str) -> str | None:
        return self._rows[cell].iloc[0]["training_task"]

    def evaluation(self, cell: str) -> dict:
        tasks = [task for task in self._rows[cell]["task"] if task is not None]
        return {"tasks": {task: {} for task in tasks}}

    def mechanism(self, cell: str) -> dict | None:
        """The cell's attained KL and objective (None: not measured, or published before they were)."""
        first = self._rows[cell].iloc[0]
        if any(first.get(measure) in (None, "") for measure in MECHANISM_MEASURES):
            return None
        return {measure: float(first[measure]) for measure in MECHANISM_MEASURES}

    def per_problem(self, cell: str, task: str) -> pd.Series | None:
        frame = self.per_task.get(task)
        if frame is None or cell not in frame.index:
            return None
        return frame.loc[cell].dropna().rename(None)  # a base evaluated on more problems than the cells

    def base_per_problem(self, model: str, task: str) -> pd.Series | None:
        return self.per_problem(BASE + model, task)


def is_published(folder: Path) -> bool:
    """Whether `folder` holds a run's published tables (not a run's own tables)."""
    return (folder / "seeds.csv").is_file() and (folder / "run.json").is_file()


def regenerate(folder: Path, out: Path) -> dict:
    """The claims, variance, main and mechanism tables computed again from the published tables in `folder`,
    written to `out` with the copied ones, as `klrl aggregate` writes a run's; returns run.json."""
    results = PublishedResults(folder)
    out.mkdir(parents=True, exist_ok=True)
    record = json.loads((folder / "plan.json").read_text())
    history = record.get("recorded", [])
    for name, frame in claim_frames(results, declared_not_testable(history), declared_sizes(history)).items():
        write_table(frame, out, name, ("csv", "md"))
    write_table(pd.DataFrame(variance_rows(results), columns=VARIANCE_COLUMNS), out, "variance", ("csv", "md"))
    write_table(pd.DataFrame(main_rows(results)), out, "main")
    for name in COPIED:
        shutil.copy(folder / name, out / name)
    (out / "plan.json").write_text(json.dumps(reanalysed(record, results), indent=2) + "\n")
    return json.loads((folder / "run.json").read_text())


def reanalysed(record: dict, results) -> dict:
    """A published analysis record (tables/plan.json) as the code of the moment analyses the same
    cells: its plan and hash, and whether that is still the plan the workflow recorded last (the
    rules or the claims may have changed since the run)."""
    history = record.get("recorded", [])
    plan = plan_of(list(results.cells.values()), declared_not_testable(history), declared_sizes(history))
    digest = plan_hash(plan)
    followed = bool(history) and history[-1]["hash"] == digest
    fixed = followed and history[-1]["cells_finished"] == 0
    return record | {"hash": digest, "plan": plan, "followed": followed, "fixed_before_results": fixed}
