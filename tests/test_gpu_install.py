"""`make gpu-env`'s pins (requirements/gpu.txt over requirements/constraints.txt, merged by
envs/gpu_constraints.py): how they merge, and that they resolve together against the package
index. The resolution needs the index (CI reaches it; no other test does) and downloads no wheel:
pip reads each wheel's metadata by HTTP range requests (fast-deps), about 1.5 minutes."""

import json
import subprocess
import sys

import pytest

from workflow_helpers import ROOT

sys.path.insert(0, str(ROOT / "envs"))
from gpu_constraints import changes, merged  # noqa: E402


def test_a_gpu_pin_replaces_the_projects_and_a_left_out_package_goes():
    constraints = "numpy==2.4.6\nSnakemake_Executor-Plugin-Slurm==2.8.0\nscipy==1.17.1  # kept\n"
    gpu = "numpy==2.3.5  # moved\nvllm==0.32.0\n!snakemake-executor-plugin-slurm  # left out\n"
    assert merged(constraints, gpu) == "scipy==1.17.1  # kept\nnumpy==2.3.5\nvllm==0.32.0\n"
    assert changes(gpu) == (["numpy==2.3.5", "vllm==0.32.0"], ["snakemake-executor-plugin-slurm"])


@pytest.mark.slow
@pytest.mark.package_index
def test_the_gpu_pins_resolve_with_the_projects_against_the_package_index(tmp_path):
    pins = tmp_path / "gpu-constraints.txt"
    pins.write_text(
        merged((ROOT / "requirements" / "constraints.txt").read_text(), (ROOT / "requirements" / "gpu.txt").read_text())
    )
    report = tmp_path / "report.json"
    resolved = subprocess.run(
        [sys.executable, "-m", "pip", "--isolated", "install", "--dry-run", "--ignore-installed", "--prefer-binary"]
        + ["--use-feature=fast-deps", "--report", str(report), "-c", str(pins), "-r", str(pins)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert resolved.returncode == 0, resolved.stderr[-3000:]
    versions = {
        row["metadata"]["name"].lower(): row["metadata"]["version"] for row in json.loads(report.read_text())["install"]
    }
    assert {name: versions[name] for name in ("torch", "vllm", "transformers", "numpy")} == {
        "torch": "2.13.0",  # the index's build (CUDA on Linux), not a +cpu one
        "vllm": "0.32.0",
        "transformers": "5.19.0",
        "numpy": "2.3.5",
    }
    assert "snakemake-executor-plugin-slurm" not in versions and any(name.startswith("nvidia-") for name in versions)


def test_the_runbook_states_each_pin_the_gpu_install_moves_and_the_package_it_removes():
    readme = (ROOT / "docs" / "paper-scale.md").read_text().replace("\n", " ")
    constraints = dict(
        line.split("==") for line in (ROOT / "requirements" / "constraints.txt").read_text().split() if "==" in line
    )
    pins, left_out = changes((ROOT / "requirements" / "gpu.txt").read_text())
    for name, version in (pin.split("==") for pin in pins):
        if name in constraints and constraints[name] != version:
            assert f"{name} {constraints[name]} → {version}" in readme
    assert left_out == ["snakemake-executor-plugin-slurm"] and "removes the SLURM executor plugin" in readme
