"""benchmarks/: its README lists every script of the folder, with a command that runs it and a link
to its latest result, and RESULTS.md gives each one's current figure; the links of its pages
reach their files and headings. A benchmark in miniature prints its verdict line, which `make
bench` gathers from the file KLRL_BENCH_VERDICTS names (the TRL one needs the `bench` extra,
which CI does not install)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_docs import make_targets, makefile_text, missing_paths
from workflow_helpers import ROOT

BENCHMARKS = ROOT / "benchmarks"


def table_rows(page: Path) -> list[list[str]]:
    """The cells of each table row of `page` whose first cell is a code span (a script's name)."""
    rows = [line.strip().strip("|").split(" | ") for line in page.read_text().splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in row] for row in rows]


def folder_scripts(folder: Path) -> list[str]:
    """Every file of `folder` but its Markdown pages (and Python's bytecode)."""
    return sorted(path.name for path in folder.iterdir() if path.is_file() and path.suffix not in (".md", ".pyc"))


def runs_script(command: str, script: str, folder: str) -> bool:
    """Whether a README's command cell runs folder/script: by its path, or by make targets whose
    recipe does."""
    if f"{folder}/{script}" in command:
        return True
    makefile = makefile_text()
    targets = re.findall(r"`make ([\w-]+)`", command)
    recipes = [re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.M) for target in targets]
    return bool(targets) and all(recipe and f"{folder}/{script}" in recipe[1] for recipe in recipes)


def test_the_readme_lists_every_script_of_the_folder_once_and_the_command_that_runs_it():
    """A benchmark's row: script, what it measures, command, latest result; a module's: module, what it holds."""
    rows = table_rows(BENCHMARKS / "README.md")
    names = [row[0].strip("`") for row in rows]
    assert sorted(names) == folder_scripts(BENCHMARKS) and len(names) == len(set(names))
    benchmarks = [row for row in rows if len(row) == 4]
    assert {row[0] for row in rows if len(row) == 2} == {
        "`bench.mk`",
        "`common.py`",
        "`gpu_check.py`",
        "`gpu_lease_check.py`",
        "`night_cell.py`",
        "`process_tree.py`",
    }
    for script, _what, command, latest in benchmarks:
        assert runs_script(command, script.strip("`"), "benchmarks"), (script, command)
        assert re.search(r"\]\([^)]+\)", latest), f"{script}: no link to its latest result"


def test_results_gives_the_current_figure_of_every_benchmark_the_readme_lists():
    readme, results = BENCHMARKS / "README.md", BENCHMARKS / "RESULTS.md"
    benchmarks = {row[0] for row in table_rows(readme) if len(row) == 4}
    figures = {row[0].split(" ")[0] for row in table_rows(results)}
    assert benchmarks <= figures, benchmarks - figures
    assert all(row[2].strip() for row in table_rows(results))


@pytest.mark.parametrize("page", sorted(BENCHMARKS.glob("*.md")), ids=lambda page: page.name)
def test_every_link_of_a_benchmark_page_reaches_its_file_and_heading(page):
    """Every link; on the current pages (README.md, RESULTS.md) every repository path as well. The
    dated pages keep the paths and commands of their time."""
    found = missing_paths(page, page.read_text())
    if page.name not in ("README.md", "RESULTS.md"):
        found = [line for line in found if ": link to " in line]
    assert found == []


def test_every_make_target_the_benchmarks_readme_names_exists():
    named = re.findall(r"`make ([\w-]+)`", (BENCHMARKS / "README.md").read_text())
    assert named and set(named) <= make_targets()


VERDICT = r"verdict: sampling ≥ 2× model.generate at batch 16: (\d+\.\d\d)×: (met|NOT MET)"


@pytest.mark.slow
def test_the_sampling_benchmark_prints_and_files_its_verdict(tmp_path):
    verdicts = tmp_path / "verdicts.txt"
    command = [sys.executable, "benchmarks/sampling.py", "--batches", "16", "--new-tokens", "2", "--reps", "1"]
    out = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, env=os.environ | {"KLRL_BENCH_VERDICTS": str(verdicts)}
    )
    assert out.returncode == 0, out.stderr[-3000:]
    printed = re.search(VERDICT, out.stdout)
    speedup, met = float(printed[1]), printed[2]
    assert (met == "met") == (speedup >= 2.0)
    [line] = verdicts.read_text().splitlines()
    assert line.startswith(printed[0] + " (") and "cores" in line and "load average" in line
