"""The suite's own order (tests/conftest.py): the tests marked `longest` are collected first, so
that under `make test`'s two workers the longest file starts at once, beside the rest."""

import subprocess
import sys

from workflow_helpers import ROOT


def test_the_paper_miniature_is_collected_first_and_every_other_test_keeps_its_place():
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "not gpu", "-p", "no:cacheprovider", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    nodeids = [line for line in listed if "::" in line]
    assert nodeids[0] == "tests/test_paper_miniature.py::test_the_paper_grid_in_miniature_runs_end_to_end"
    files = [nodeid.split("::")[0] for nodeid in nodeids[1:]]
    runs = [name for position, name in enumerate(files) if position == 0 or files[position - 1] != name]
    assert len(runs) == len(set(runs)) > 40  # each file's tests together, as collected
    assert "tests/test_paper_miniature.py" not in runs
