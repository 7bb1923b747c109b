"""The benchmarks in miniature: each prints its verdict line, which `make bench` gathers from the
file KLRL_BENCH_VERDICTS names (the TRL one needs the `bench` extra, which CI does not install)."""

import os
import re
import subprocess
import sys

import pytest

from workflow_helpers import ROOT

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
