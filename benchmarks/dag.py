"""Snakemake DAG construction time for the paper grid: `snakemake -n --configfile config/paper.yaml`.

Times whole dry runs (process start to exit) of this working tree and, with `--before REV`, of
the same files at git revision REV, interleaved; each runs in a scratch copy, the older one with
its own `workflow/` first on PYTHONPATH so that its `klrl` is the one imported. Also prints what
the Snakefile's imports cost (`python -X importtime -c "import klrl.grid.expansion"`) and whether they pull in
torch or transformers.

    .venv/bin/python benchmarks/dag.py [--before 336c980] [--reps 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import export_revision, machine, markdown_table, median, verdict

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW_FILES = ("Snakefile", "workflow", "config", "envs", "profiles", "paper_figures")
SNAKEMAKE = Path(sys.executable).parent / "snakemake"


def copy_tree(dest: Path) -> Path:
    dest.mkdir(parents=True)
    for name in WORKFLOW_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif source.exists():
            shutil.copy(source, dest / name)
    return dest


def dry_run(folder: Path, pythonpath: str | None) -> float:
    env = os.environ | {"PATH": f"{SNAKEMAKE.parent}:{os.environ['PATH']}"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    start = time.perf_counter()
    out = subprocess.run(
        [str(SNAKEMAKE), "-n", "--quiet", "all", "--cores", "1", "--configfile", "config/paper.yaml"],
        cwd=folder, capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    elapsed = time.perf_counter() - start
    if out.returncode:
        raise RuntimeError(f"dry run failed in {folder}:\n{out.stderr[-3000:]}")
    return elapsed


def import_report(pythonpath: str | None) -> tuple[float, list[str]]:
    """Seconds to import klrl.grid.expansion (the Snakefile's own imports) and which heavy modules it loads."""
    code = "import sys, time; t = time.perf_counter(); import klrl.grid.expansion; print(time.perf_counter() - t, *[m for m in ('torch', 'transformers', 'numpy', 'pandas') if m in sys.modules])"
    env = os.environ | ({"PYTHONPATH": pythonpath} if pythonpath else {})
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout.split()
    return float(out[0]), out[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", help="a git revision to compare with (e.g. the commit before the fix)")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"this tree": (copy_tree(Path(tmp) / "now"), None)}
        if args.before:
            old = export_revision(args.before, Path(tmp) / "before")
            trees = {f"before ({args.before})": (old, str(old / "workflow"))} | trees
        times = {name: [] for name in trees}
        for _ in range(args.reps):
            for name, (folder, pythonpath) in trees.items():
                times[name].append(dry_run(folder, pythonpath))
        rows = []
        for name, (folder, pythonpath) in trees.items():
            seconds, heavy = import_report(pythonpath)
            rows.append([name, median(times[name]), min(times[name]), seconds, ", ".join(heavy) or "none"])
    print(f"snakemake -n --configfile config/paper.yaml, {args.reps} runs each, interleaved")
    print(f"machine: {machine()}\n")
    print(
        markdown_table(
            ["tree", "dry run s (median)", "min s", "import klrl.grid.expansion s", "heavy modules loaded"], rows
        )
    )
    verdict("paper DAG dry run < 5 s", f"{median(times['this tree']):.2f} s", median(times["this tree"]) < 5.0)


if __name__ == "__main__":
    main()
