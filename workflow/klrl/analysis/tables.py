"""`klrl aggregate`: every cell's files into the tables under results/<experiment>/tables/ (files in, files out).

Reads only files under results/<experiment>/ (never MLflow): each cell's resolved settings
(train/settings.json: its model, training task, KL configuration, β, lag and seed), train/status.json,
train/metrics.jsonl and eval/results.json + eval/samples/, each base model's eval/, and
<root>/toy/bias.csv. Writes, each as CSV, Markdown and LaTeX where it is a paper table:

  scores.csv        per cell × evaluation task: status, pass@1, standard error, base, change
  main              per model × KL config × β × policy × task: pass@1 mean over seeds with a
                    bootstrap 95% interval over seeds and problems (ci_lo, ci_hi; klrl.analysis.bootstrap),
                    the base model's pass@1 and the change from it with its own interval
  curves.csv        per cell, step and metric (long): periodic pass@1, training accuracy, entropy,
                    exact sequence reverse KL, and the per-token forward KL summed over πθ's
                    prefixes (not the sequence forward KL); NaN where the logged value was not finite
  table1            per KL config × policy mode: gradient bias (toy study; off-policy at the
                    distance toy_tv, the total variation between μ and πθ that the toy's numbers
                    are for, not the grid's lag: <root>/toy/by_lag.csv has the curve) and the
                    training behaviour of its cells (klrl.analysis.outcomes states the rule)
  paper_comparison  the paper's published findings beside ours, with the scale of each
  table2            how to get each configuration in verl, OpenRLHF, TRL and SkyRL
  toy_bias.csv      a copy of the toy study's table, for the figures
  claims            each paper claim (klrl.analysis.claims) per model, decided as one family of claims
                    at its declared size (klrl.analysis.claim_table): its estimate, raw and adjusted
                    p of presence and of its size, verdict (reproduced / reproduced, below its size /
                    absent at its size / contradicted / inconclusive / not in this grid) and reason
  claim_rows        its rows, descriptive (klrl.analysis.verdicts): per claim, model, evaluation set,
                    β and lag the test (t or exact), collapsed seeds, effect, interval and raw p, or
                    why the row could not be tested (at floor / too few survivors)
  variance          per model × evaluation task: the seed-to-seed and seed × problem SDs of pass@1
                    that the claims' intervals pool, for sizing seeds (`klrl power seeds`)
  mechanism_claims  the mechanism claims (klrl.analysis.mechanism_claims) on the KL and objective each
                    cell's final policy attains: one row per claim, its declared size, p-values
                    raw and adjusted in the family of claims, verdict and reason
  mechanism_rows    their descriptive rows: per claim and β (or β step), the estimate and its 95% interval
  mechanism.csv     per measured cell: the KL(π‖πref) and KL(πref‖π) its final policy attains, its
                    entropy, reward and objective reward − β·KL (klrl.analysis.mechanism_table)
  provenance.csv    per commit the cells trained at: how many, first and last finishing date
                    (klrl.core.provenance)
  plan.json         the run's plan (klrl.analysis.preregistration) as the analysis ran it, its hash, the plans the
                    workflow recorded before and during the run, and whether the analysis followed them

A cell with no results is a row with status `missing`; a diverged cell keeps its status and
whatever scores it has; no value is dropped silently. The tables go to the grid's MLflow run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from klrl.analysis.claim_family import NOT_IN_GRID
from klrl.analysis.mechanism_table import MEASURED, mechanism_cell_rows
from klrl.analysis.outcomes import LABELS, classify
from klrl.analysis.preregistration import analysis_record
from klrl.core.provenance import PROVENANCE_COLUMNS, commit_rows
from klrl.core.files import read_jsonl
from klrl.core.paths import Layout, samples_file
from klrl.analysis.bootstrap import bootstrap_mean_ci
from klrl.analysis.claim_table import claim_frames
from klrl.analysis.verdicts import VARIANCE_COLUMNS, variance_rows
from klrl.training.config import TrainConfig, load_config
from klrl.training.record import read_metrics

LIBRARY_KEYS = Path(__file__).with_name("library_keys.yaml")
CELL_TAGS = ("model", "kl", "beta", "policy", "lag", "seed")  # of every row, from the cell's settings
CONFIG_KEYS = CELL_TAGS[:-1]  # a configuration: its seeds pooled
CURVE_METRICS = {
    "periodic_eval/pass@1": "eval_pass@1",
    "rollout/accuracy": "train_accuracy",
    "exact/entropy_token": "entropy",
    "exact/forward_kl_policy_prefixes_seq": "forward_kl_policy_prefixes",
    "exact/reverse_kl_seq": "reverse_kl",
}


def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _per_problem(samples: Path) -> pd.Series | None:
    """Per-problem pass@1 of one evaluation set, indexed by problem id."""
    if not samples.is_file():
        return None
    return pd.Series({record["id"]: record["pass@1"] for _, record, _ in read_jsonl(samples)}, dtype=float)


def cell_tags(config: TrainConfig) -> dict:
    """What a row says of its cell, from the cell's resolved settings (lag: the actor's staleness, 0 on-policy)."""
    policy = "off" if config.async_lag else "on"
    return {
        "model": config.model,
        "kl": config.kl.name,
        "beta": config.kl.beta,
        "policy": policy,
        "lag": config.async_lag,
        "seed": config.seed,
    }


class Results:
    """The files of one results folder, read once."""

    def __init__(self, cells: list[str], root: Path) -> None:
        self.layout = Layout(Path(root))
        self.settings = {cell: self._settings(cell) for cell in cells}
        self.cells = {cell: cell_tags(config) for cell, config in self.settings.items()}

    def _settings(self, cell: str) -> TrainConfig:
        path = self.layout.settings(cell)
        if not path.is_file():
            raise ValueError(
                f"{path}: missing; the workflow writes each cell's settings before it trains (rule cell_settings)"
            )
        return load_config(path)

    def status(self, cell: str) -> dict:
        return _read_json(self.layout.status(cell)) or {"status": "missing", "step": None}

    def evaluation(self, cell: str) -> dict:
        return _read_json(self.layout.cell_eval(cell)) or {"tasks": {}}

    def mechanism(self, cell: str) -> dict | None:
        """The final policy's attained KL and objective, measured at evaluation (None: not measured)."""
        return self.evaluation(cell).get("mechanism")

    def training_task(self, cell: str) -> str | None:
        return self.settings[cell].task

    def base_evaluation(self, model: str) -> dict:
        return _read_json(self.layout.base_eval(model)) or {"tasks": {}}

    def per_problem(self, cell: str, task: str) -> pd.Series | None:
        return _per_problem(samples_file(self.layout.cell_eval(cell), task))

    def base_per_problem(self, model: str, task: str) -> pd.Series | None:
        return _per_problem(samples_file(self.layout.base_eval(model), task))

    def metrics(self, cell: str) -> list[dict]:
        path = self.layout.metrics(cell)
        return read_metrics(path) if path.is_file() else []  # a torn last line is dropped


def score_rows(results: Results) -> list[dict]:
    rows = []
    for cell, tags in results.cells.items():
        status = results.status(cell)
        base = results.base_evaluation(tags["model"])
        for task, score in (results.evaluation(cell)["tasks"] or {None: {}}).items():
            base_score = base["tasks"].get(task, {}).get("pass@1")
            value = score.get("pass@1")
            rows.append(
                {
                    "cell": cell,
                    **tags,
                    "status": status["status"],
                    "step": status["step"],
                    "task": task,
                    "pass@1": value,
                    "stderr": score.get("stderr"),
                    "problems": score.get("problems"),
                    "samples": score.get("samples"),
                    "base_pass@1": base_score,
                    "delta_vs_base": None if value is None or base_score is None else value - base_score,
                }
            )
    return rows


def _status_summary(statuses: list[str]) -> str:
    """E.g. '2 completed, 1 missing'."""
    counts = pd.Series(statuses).value_counts()
    return ", ".join(f"{count} {status}" for status, count in counts.items())


def main_rows(results: Results) -> list[dict]:
    """One row per configuration and evaluation task, seeds pooled by the two-level bootstrap."""
    configs: dict[tuple, list[str]] = {}
    for cell, tags in results.cells.items():
        configs.setdefault(tuple(tags[key] for key in CONFIG_KEYS), []).append(cell)
    rows = []
    for key, cells in configs.items():
        statuses = [results.status(cell)["status"] for cell in cells]
        tasks = [task for cell in cells for task in results.evaluation(cell)["tasks"]]
        in_domain = next((task for cell in cells if (task := results.training_task(cell))), None)
        for task in dict.fromkeys(tasks) or [None]:
            row = dict(zip(CONFIG_KEYS, key)) | {
                "task": task,
                "domain": None if task is None else ("in" if task == in_domain else "out"),
            }
            per_seed = [series for cell in cells if task and (series := results.per_problem(cell, task)) is not None]
            row |= {"seeds": len(per_seed), "cells": len(cells), "status": _status_summary(statuses)}
            row |= dict.fromkeys(
                ("pass@1", "ci_lo", "ci_hi", "base_pass@1", "delta_vs_base", "delta_ci_lo", "delta_ci_hi"), np.nan
            )
            if per_seed:
                problems = per_seed[0].index
                if any(not series.index.equals(problems) for series in per_seed):
                    raise ValueError(f"{key} {task}: the seeds were evaluated on different problems")
                scores = np.stack([series.to_numpy() for series in per_seed])
                row["pass@1"], row["ci_lo"], row["ci_hi"] = bootstrap_mean_ci(scores)
                base = results.base_per_problem(key[0], task)
                if base is not None and set(base.index) >= set(problems):
                    row["base_pass@1"] = float(base.loc[problems].mean())
                    row["delta_vs_base"], row["delta_ci_lo"], row["delta_ci_hi"] = bootstrap_mean_ci(
                        scores, baseline=base.loc[problems].to_numpy()
                    )
            rows.append(row)
    return rows


def curve_rows(results: Results) -> list[dict]:
    """Long format: one row per cell, step and logged metric; a non-finite value stays NaN."""
    rows = []
    for cell, tags in results.cells.items():
        for record in results.metrics(cell):
            for metric, name in CURVE_METRICS.items():
                if metric in record:
                    rows.append({"cell": cell, **tags, "step": record["step"], "metric": name, "value": record[metric]})
    return rows


def _in_domain_curve(results: Results, cell: str) -> list[float]:
    return [record["periodic_eval/pass@1"] for record in results.metrics(cell) if "periodic_eval/pass@1" in record]


def table1_rows(results: Results, toy_bias: pd.DataFrame | None) -> list[dict]:
    """Per KL config and policy mode: the toy study's relative bias and the cells' behaviour."""
    groups: dict[tuple, list[str]] = {}
    for cell, tags in results.cells.items():
        groups.setdefault((tags["kl"], tags["policy"]), []).append(cell)
    rows = []
    for (kl, policy), cells in groups.items():
        labels = [classify(results.status(cell)["status"], _in_domain_curve(results, cell)) for cell in cells]
        counts = {label: labels.count(label) for label in LABELS}
        bias = tv = np.nan
        if toy_bias is not None:
            match = toy_bias[(toy_bias["config"] == kl) & (toy_bias["mode"] == policy)]
            bias = float(match["rel_bias"].iloc[0]) if len(match) else np.nan
            if len(match) and policy == "off" and "tv" in match:
                tv = float(match["tv"].iloc[0])
        observed = [label for label in LABELS[:3] if counts[label]]
        behaviour = max(observed, key=lambda label: counts[label]) if observed else "missing"
        rows.append(
            {
                "kl": kl,
                "policy": policy,
                "toy_rel_bias": bias,
                "toy_tv": tv,
                "behaviour": behaviour,
                "cells": len(cells),
            }
            | counts
        )
    return rows


# The paper's published findings (docs/paper.md) that a grid can be compared with.
PAPER_FINDINGS = (
    ("k1-loss", "on", "pass@1 below 0.1 for β ≥ 0.3 (unstable)", "in", lambda b: b >= 0.3),
    ("k3-reward", "on", "collapse at every β", "in", lambda b: True),
    ("k1-reward", "on", "stable, best in- and out-of-domain", "out", lambda b: True),
    (
        "k3-loss",
        "on",
        "stable, worse than K1 in reward out of domain (college physics 0.429 vs 0.508)",
        "out",
        lambda b: True,
    ),
    ("k3-both", "on", "matches K1 in reward", "in", lambda b: True),
    ("none", "off", "collapses off-policy", "in", lambda b: True),
    ("k1-loss", "off", "collapses off-policy", "in", lambda b: True),
    ("k1-reward", "off", "stable off-policy, slightly ahead of K3 in loss", "in", lambda b: True),
    ("k3-loss", "off", "stable off-policy", "in", lambda b: True),
)


def paper_comparison_rows(main: pd.DataFrame, table1: pd.DataFrame, scale: str) -> list[dict]:
    rows = []
    for kl, policy, finding, domain, beta_filter in PAPER_FINDINGS:
        picked = main[(main["kl"] == kl) & (main["policy"] == policy) & (main["domain"] == domain)]
        picked = picked[[beta_filter(b) for b in picked["beta"]]] if len(picked) else picked
        behaviour = table1[(table1["kl"] == kl) & (table1["policy"] == policy)]
        ours = NOT_IN_GRID
        if len(picked):
            columns = picked[["task", "beta", "pass@1", "ci_lo", "ci_hi"]].itertuples(index=False)
            ours = "pass@1 " + ", ".join(
                f"{task} β {b:g}: {v:.3f} [{lo:.3f}, {hi:.3f}]" for task, b, v, lo, hi in columns
            )
        if len(behaviour):
            row = behaviour.iloc[0]
            ours += f"; behaviour {row['behaviour']} ({', '.join(f'{row[label]} {label}' for label in LABELS if row[label])})"
        rows.append({"kl": kl, "policy": policy, "paper": finding, "ours": ours, "scale": scale})
    return rows


def table2_rows(path: Path = LIBRARY_KEYS) -> list[dict]:
    libraries = yaml.safe_load(path.read_text())["libraries"]
    configs = list(dict.fromkeys(config for library in libraries.values() for config in library["configs"]))
    return [
        {"kl": config} | {name: library["configs"].get(config, "") for name, library in libraries.items()}
        for config in configs
    ]


def write_table(frame: pd.DataFrame, folder: Path, name: str, formats=("csv", "md", "tex")) -> None:
    if "csv" in formats:
        frame.to_csv(folder / f"{name}.csv", index=False)
    if "md" in formats:
        (folder / f"{name}.md").write_text(frame.to_markdown(index=False, floatfmt=".3f") + "\n")
    if "tex" in formats:
        (folder / f"{name}.tex").write_text(frame.to_latex(index=False, float_format="%.3f", na_rep="--"))


def aggregate(cells: list[str], out: Path, root: Path, scale: str = "toy") -> dict[str, pd.DataFrame]:
    results = Results(cells, root)
    out.mkdir(parents=True, exist_ok=True)
    toy_path = results.layout.toy("bias.csv")
    toy_bias = pd.read_csv(toy_path) if toy_path.is_file() else None
    if toy_bias is not None:
        shutil.copy(toy_path, out / "toy_bias.csv")
    tables = {
        "scores": pd.DataFrame(score_rows(results)),
        "main": pd.DataFrame(main_rows(results)),
        "curves": pd.DataFrame(curve_rows(results), columns=["cell", *CELL_TAGS, "step", "metric", "value"]),
        "table1": pd.DataFrame(table1_rows(results, toy_bias)),
    }
    tables["paper_comparison"] = pd.DataFrame(paper_comparison_rows(tables["main"], tables["table1"], scale))
    tables["table2"] = pd.DataFrame(table2_rows())
    record = analysis_record(list(results.cells.values()), results.layout)
    tables |= claim_frames(results, record["plan"]["not_testable"], record["plan"].get("mechanism_sizes"))
    tables["variance"] = pd.DataFrame(variance_rows(results), columns=VARIANCE_COLUMNS)
    tables["mechanism"] = pd.DataFrame(mechanism_cell_rows(results), columns=["cell", *CELL_TAGS, *MEASURED])
    tables["provenance"] = pd.DataFrame(
        commit_rows([results.status(cell) for cell in cells]), columns=PROVENANCE_COLUMNS
    )
    (out / "plan.json").write_text(json.dumps(record, indent=2) + "\n")
    formats = {
        "scores": ("csv",),
        "curves": ("csv",),
        "claims": ("csv", "md"),
        "claim_rows": ("csv", "md"),
        "variance": ("csv", "md"),
        "mechanism": ("csv",),
        "mechanism_rows": ("csv", "md"),
        "mechanism_claims": ("csv", "md"),
        "provenance": ("csv",),
    }
    for name, frame in tables.items():
        write_table(frame, out, name, formats.get(name, ("csv", "md", "tex")))
    return tables
