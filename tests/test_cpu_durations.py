"""`--durations N` also lists the N tests that cost the most CPU, their children's included, as
pytest-xdist's workers ran them (tests/cpu_durations.py)."""

import json
import re
import subprocess
import sys
from pathlib import Path

INNER = """
import subprocess, sys, time

def test_sleeps():
    time.sleep(0.6)

def test_a_child_computes():
    subprocess.run([sys.executable, "-c", "import time\\nwhile time.process_time() < 0.6: pass"], check=True)
"""


def test_the_cpu_table_counts_a_tests_children_and_not_its_waiting(tmp_path):
    """And with KLRL_TEST_TIMELINE, each phase's suite, worker, start, stop and CPU as JSON lines."""
    (tmp_path / "test_inner.py").write_text(INNER)
    command = [sys.executable, "-m", "pytest", "-p", "cpu_durations", "-n", "2", "--durations", "2", "-q"]
    done = subprocess.run(
        command + ["-p", "no:cacheprovider", "test_inner.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(Path(__file__).parent), "PATH": "/usr/bin:/bin", "KLRL_TEST_TIMELINE": "timeline.jsonl"},
    )
    assert done.returncode == 0, done.stdout[-2000:]
    table = done.stdout.split("tests by CPU", 1)[1]
    rows = re.findall(r"^ +([0-9.]+)s cpu  (\S+::\S+)$", table, re.MULTILINE)
    seconds = {name: float(value) for value, name in rows}
    assert [name for _, name in rows] == ["test_inner.py::test_a_child_computes", "test_inner.py::test_sleeps"]
    assert 0.6 <= seconds["test_inner.py::test_a_child_computes"] < 1.5
    assert seconds["test_inner.py::test_sleeps"] < 0.2
    total = re.search(r"([0-9.]+)s cpu  in all, 2 tests", table)
    assert total and abs(float(total[1]) - sum(seconds.values())) < 0.1
    phases = [json.loads(line) for line in (tmp_path / "timeline.jsonl").read_text().splitlines()]
    assert sorted((phase["test"], phase["phase"]) for phase in phases) == sorted(
        (name, when) for name in seconds for when in ("setup", "call", "teardown")
    )
    assert {phase["worker"] for phase in phases} <= {"gw0", "gw1"}
    assert {phase["suite"] for phase in phases} == {Path(sys.prefix).name}
    calls = {phase["test"]: phase for phase in phases if phase["phase"] == "call"}
    assert 0.6 <= calls["test_inner.py::test_sleeps"]["stop"] - calls["test_inner.py::test_sleeps"]["start"] < 1.5
    assert calls["test_inner.py::test_a_child_computes"]["cpu_s"] >= 0.6
