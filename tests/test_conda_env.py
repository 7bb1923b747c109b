"""envs/klrl.yaml, the rules' conda environment: it installs the project with the pins of
pyproject.toml and requirements/constraints.txt, as `make install` does, and copies no pin."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
ENV = ROOT / "envs" / "klrl.yaml"


def test_the_conda_environment_installs_the_project_with_its_constraints_and_copies_no_pin():
    dependencies = yaml.safe_load(ENV.read_text())["dependencies"]
    (pip,) = [item["pip"] for item in dependencies if isinstance(item, dict)]
    options = dict(line.split(maxsplit=1) for line in pip)
    assert set(options) == {"--extra-index-url", "-c", "-e"}  # a package line would be a copied pin
    assert (ENV.parent / options["-c"]).resolve() == ROOT / "requirements" / "constraints.txt"
    assert (ENV.parent / options["-e"]).resolve() == ROOT
    (python,) = [item for item in dependencies if isinstance(item, str) and item.startswith("python=")]
    makefile_python = re.search(r"^PYTHON \?= python(\d+\.\d+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert python.removeprefix("python=").startswith(makefile_python + ".")
