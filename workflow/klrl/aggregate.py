"""`klrl aggregate`: every cell's files into tables under results/tables/ (files in, files out).

scores.csv  one row per cell × evaluation task: the cell's tags, its training status and last
            step, pass@1 and its standard error, the base model's pass@1 on the same task and
            the change from it. A cell with no results yet is a row with status `missing`;
            a diverged cell keeps its status (and its scores, when it could be evaluated).
Reads only files under results/, never MLflow; the tables are logged to the grid's parent run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from klrl.grid import RESULTS, parse_cell_id

SCORE_COLUMNS = (
    "cell", "model", "kl", "beta", "policy", "seed", "status", "step", "task",
    "pass@1", "stderr", "problems", "samples", "base_pass@1", "delta_vs_base",
)


def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def score_rows(cells: list[str], results: Path = RESULTS) -> list[dict]:
    rows = []
    for cell in cells:
        tags = parse_cell_id(cell)
        status = _read_json(results / "cells" / cell / "train" / "status.json") or {"status": "missing", "step": None}
        evaluation = _read_json(results / "cells" / cell / "eval" / "results.json") or {"tasks": {}}
        base = _read_json(results / "base" / tags["model"] / "eval" / "results.json") or {"tasks": {}}
        tasks = evaluation["tasks"] or {None: {}}
        for task, score in tasks.items():
            base_score = base["tasks"].get(task, {}).get("pass@1")
            value = score.get("pass@1")
            rows.append(
                {"cell": cell, **tags, "status": status["status"], "step": status["step"], "task": task,
                 "pass@1": value, "stderr": score.get("stderr"), "problems": score.get("problems"),
                 "samples": score.get("samples"), "base_pass@1": base_score,
                 "delta_vs_base": None if value is None or base_score is None else value - base_score}
            )
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cells", nargs="+", required=True, help="cell ids")
    parser.add_argument("--out", type=Path, default=RESULTS / "tables", help="folder for the tables")
    parser.add_argument("--mlflow-runs", type=Path, help="the grid's runs file: tables go to its parent run")


def run(args: argparse.Namespace) -> None:
    from klrl.training.tracking import Tracker

    args.out.mkdir(parents=True, exist_ok=True)
    scores = pd.DataFrame(score_rows(args.cells), columns=list(SCORE_COLUMNS))
    scores.to_csv(args.out / "scores.csv", index=False)
    if args.mlflow_runs:
        Tracker.from_runs_file(args.mlflow_runs, "grid").log_artifact(args.out, None)
    counts = scores.drop_duplicates("cell")["status"].value_counts().to_dict()
    print(f"{args.out / 'scores.csv'}: {len(scores)} rows, cells by status {counts}")
