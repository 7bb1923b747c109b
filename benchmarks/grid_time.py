"""Wall time and throughput of a grid through Snakemake, and what a finished run's jobs add up to.

Default: copies the workflow into fresh scratch folders (as tests/test_workflow.py does) and runs
`snakemake --profile profiles/local --configfile .test/config/test.yaml --cores N` for each N of
`--cores`, timing the whole command; then, for each run, reads its job timings and prints the
grid's cells per hour (pretraining included) and a cell's RL steps per minute (its train job's
wall time: rollouts, scoring, updates, periodic evaluation and checkpoints).

`--before REV`: also runs the same config from git revision REV's files (its own `workflow/`
first on PYTHONPATH), before this tree at each core count, and prints whether cells per hour
reached 2× REV's (the grid-throughput target; give `--configfile config/config.yaml` for the
default grid, about an hour for both trees).

`--summarise FOLDER [--configfile ...]`: only reads a finished run in FOLDER (e.g. the default
grid's, too long to rerun on a shared machine). From results/<experiment>/benchmarks/**/*.tsv
(Snakemake's `benchmark:` files, one per job: `s` the job's wall seconds, `max_rss` its peak
resident memory in MB) it prints the summed job time (≈ the run's time on one core, scheduling
aside), the time and peak memory per rule, and the critical path: the longest chain of dependent
jobs (edges from `snakemake --dag`), i.e. the wall time no number of cores can beat. From the
cells' metrics.jsonl it prints the median seconds of an RL step and of each of its phases.

    .venv/bin/python benchmarks/grid_time.py [--cores 1 2] [--configfile .test/config/test.yaml] [--before REV]
    .venv/bin/python benchmarks/grid_time.py --summarise path/to/finished/run --configfile config/config.yaml
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import yaml

from common import export_revision, machine, markdown_table, verdict
from klrl.core.paths import BASES, WORKFLOW_FILES, Layout

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).parent / "snakemake"
NODE = re.compile(r'^\s*(\d+)\[label = "([^"]*)"')
EDGE = re.compile(r"^\s*(\d+) -> (\d+)")
TARGET = 2.0  # the target: cells per hour against the baseline revision's


def snakemake(folder: Path, *args: str, pythonpath: str | None = None) -> subprocess.CompletedProcess:
    env = os.environ | {"PATH": f"{SNAKEMAKE.parent}:{os.environ['PATH']}"}
    env.pop("MLFLOW_TRACKING_URI", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([str(SNAKEMAKE), *args], cwd=folder, capture_output=True, text=True, env=env, check=False)


def copy_workflow(folder: Path) -> Path:
    for name in WORKFLOW_FILES:
        source, dest = ROOT / name, folder / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, dest)
        elif source.exists():
            shutil.copy(source, dest)
    return folder


def timed_grid(folder: Path, configfile: str, cores: int, pythonpath: str | None = None) -> tuple[float, int]:
    """Wall seconds of the whole grid in `folder`, and its number of cells (train jobs)."""
    nodes, _ = dag(folder, configfile, pythonpath)
    start = time.perf_counter()
    out = snakemake(
        folder, "--profile", "profiles/local", "--configfile", configfile, "--cores", str(cores), pythonpath=pythonpath
    )
    wall = time.perf_counter() - start
    if out.returncode:
        raise RuntimeError(f"grid failed in {folder}:\n{out.stderr[-3000:]}")
    return wall, sum(rule == "train" for rule, _ in nodes.values())


def steps_per_minute(out: Path) -> float | None:
    """Median over cells of RL steps per minute of the cell's train job (its benchmark file)."""
    rates = []
    for metrics in sorted((out / "cells").glob("*/train/metrics.jsonl")):
        cell = metrics.parents[1].name
        tsv = out / "benchmarks" / "train" / f"{cell}.tsv"
        steps = sum(1 for line in metrics.read_text().splitlines() if '"time/' in line)
        if tsv.exists() and steps:
            rates.append(steps / (job_cost(tsv)[0] / 60))
    return statistics.median(rates) if rates else None


def job_cost(tsv: Path) -> tuple[float, float]:
    """A job's wall seconds and peak resident memory (MB) from its benchmark file."""
    with tsv.open() as handle:
        row = next(csv.DictReader(handle, delimiter="\t"))
    return float(row["s"]), float(row["max_rss"]) if row["max_rss"] not in ("", "NA", "-") else 0.0


def step_phases(out: Path) -> dict[str, float]:
    """Median seconds per RL step over every cell of a run: the whole step and each `time/` phase."""
    phases = defaultdict(list)
    for metrics in sorted((out / "cells").glob("*/train/metrics.jsonl")):
        for line in metrics.read_text().splitlines():
            times = {
                key.removeprefix("time/"): value for key, value in json.loads(line).items() if key.startswith("time/")
            }
            if times:
                phases["step"].append(sum(times.values()))
                for phase, value in times.items():
                    phases[phase].append(value)
    return {phase: statistics.median(values) for phase, values in phases.items()}


def dag(
    folder: Path, configfile: str, pythonpath: str | None = None
) -> tuple[dict[int, tuple[str, list[str]]], list[tuple[int, int]]]:
    """Jobs (rule, wildcard values) and dependency edges of the run's DAG, from `snakemake --dag`."""
    out = snakemake(folder, "--dag", "--forceall", "--configfile", configfile, pythonpath=pythonpath)
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    nodes, edges = {}, []
    for line in out.stdout.splitlines():
        if match := NODE.match(line):
            rule, *wildcards = match.group(2).split("\\n")
            nodes[int(match.group(1))] = (rule, [w.split(": ", 1)[1] for w in wildcards])
        elif match := EDGE.match(line):
            edges.append((int(match.group(1)), int(match.group(2))))
    return nodes, edges


def benchmark_file(bench: Path, rule: str, values: list[str]) -> Path | None:
    """A job's benchmark file: <rule>.tsv, <rule>/<wildcard value>.tsv, a rule's only file, or
    the one file named by a wildcard value in another folder (rule `figure` writes figures/);
    a base's build, shared by experiments, keeps its own beside the model (results/bases/)."""
    if rule == "build_base":
        built = bench.parents[2] / BASES / "-".join(values) / "build.tsv"
        return built if built.exists() else None
    if (bench / f"{rule}.tsv").exists():
        return bench / f"{rule}.tsv"
    for value in values:
        if (bench / rule / f"{value}.tsv").exists():
            return bench / rule / f"{value}.tsv"
    files = list((bench / rule).glob("*.tsv"))
    if len(files) == 1:
        return files[0]
    elsewhere = [path for value in values for path in bench.glob(f"*/{value}.tsv")]
    return elsewhere[0] if len(elsewhere) == 1 else None


def summarise(folder: Path, configfile: str) -> dict:
    """Summed job seconds, seconds and peak memory per rule, the critical path and the RL step's
    phases of a finished run in `folder`."""
    out = folder / Layout.of(yaml.safe_load((folder / configfile).read_text())).root
    bench = out / "benchmarks"
    nodes, edges = dag(folder, configfile)
    parents = defaultdict(list)
    for source, target in edges:
        parents[target].append(source)
    seconds, rss = {}, {}
    for node, (rule, values) in nodes.items():
        tsv = benchmark_file(bench, rule, _wildcard_values(node, nodes, parents))
        seconds[node], rss[node] = job_cost(tsv) if tsv else (0.0, 0.0)
    per_rule, peak_rss = defaultdict(float), defaultdict(float)
    for node, (rule, _) in nodes.items():
        per_rule[rule] += seconds[node]
        peak_rss[rule] = max(peak_rss[rule], rss[node])
    finish, best_parent = {}, {}
    for node in _topological(nodes, parents):
        start = max((finish[p] for p in parents[node]), default=0.0)
        best_parent[node] = max(parents[node], key=lambda p: finish[p], default=None)
        finish[node] = start + seconds[node]
    node, path = max(finish, key=finish.get), []
    while node is not None:
        path.append(node)
        node = best_parent[node]
    chain = [f"{nodes[n][0]} {seconds[n]:.0f}s" for n in reversed(path) if seconds[n] > 0]
    return {
        "sum": sum(seconds.values()),
        "critical": max(finish.values()),
        "per_rule": dict(per_rule),
        "peak_rss": dict(peak_rss),
        "path": chain,
        "jobs": len(nodes),
        "step": step_phases(out),
        "steps_per_minute": steps_per_minute(out),
    }


def _wildcard_values(node: int, nodes: dict, parents: dict) -> list[str]:
    """A job's wildcard values; for one whose label names none (train, evaluate: their cell comes
    through the settings file), those of its nearest ancestors that name some."""
    values = nodes[node][1]
    return values or [value for parent in parents[node] for value in _wildcard_values(parent, nodes, parents)]


def _topological(nodes: dict, parents: dict) -> list[int]:
    order, done = [], set()

    def visit(node):
        if node not in done:
            done.add(node)
            for parent in parents[node]:
                visit(parent)
            order.append(node)

    for node in nodes:
        visit(node)
    return order


def print_summary(label: str, summary: dict, wall: float | None = None) -> None:
    print(
        f"\n{label}: {summary['jobs']} jobs, summed job time {summary['sum']:.0f} s, critical path {summary['critical']:.0f} s"
        + (f", wall {wall:.0f} s" if wall else "")
    )
    print("critical path: " + " → ".join(summary["path"]))
    rules = sorted(summary["per_rule"], key=lambda rule: -summary["per_rule"][rule])
    print(
        markdown_table(
            ["rule", "summed s", "peak RSS MB"], [[r, summary["per_rule"][r], summary["peak_rss"][r]] for r in rules]
        )
    )
    if summary["step"]:
        print(
            "\nmedian seconds per RL step over the cells' steps: "
            + ", ".join(f"{k} {v:.3g}" for k, v in summary["step"].items())
        )
    if summary["steps_per_minute"]:
        print(
            f"a cell's throughput: {summary['steps_per_minute']:.1f} RL steps per minute of its train job (median over cells)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--configfile", default=".test/config/test.yaml")
    parser.add_argument("--summarise", type=Path, help="a finished run's folder: only read its timings")
    parser.add_argument(
        "--before", help="a git revision whose grid to run first at each core count, for the 2× verdict"
    )
    args = parser.parse_args()
    print(f"machine: {machine()}")
    if args.summarise:
        print_summary(str(args.summarise), summarise(args.summarise, args.configfile))
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for cores in args.cores:
            before_rate = None
            if args.before:
                old = export_revision(args.before, Path(tmp) / f"before{cores}")
                wall, cells = timed_grid(old, args.configfile, cores, str(old / "workflow"))
                before_rate = cells / wall * 3600
                rows.append([f"before ({args.before})", cores, cells, wall, before_rate, "", "", ""])
            folder = copy_workflow(Path(tmp) / f"cores{cores}")
            wall, cells = timed_grid(folder, args.configfile, cores)
            summary = summarise(folder, args.configfile)
            print_summary(f"{args.configfile} at --cores {cores}", summary, wall)
            rate = cells / wall * 3600
            rows.append(
                [
                    "this tree",
                    cores,
                    cells,
                    wall,
                    rate,
                    summary["sum"],
                    summary["critical"],
                    summary["steps_per_minute"] or "",
                ]
            )
            if before_rate:
                verdict(
                    f"grid cells per hour ≥ 2× {args.before}'s ({args.configfile}, {cores} cores)",
                    f"{rate / before_rate:.2f}×",
                    rate / before_rate >= TARGET,
                )
    print(f"\nmachine after the runs: {machine()}\n")
    print(
        markdown_table(
            [
                "tree",
                "cores",
                "cells",
                "wall s",
                "cells per hour",
                "summed job s",
                "critical path s",
                "RL steps per minute",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
