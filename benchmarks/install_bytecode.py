"""The project's venv with bytecode compiled at install (pip's default) against bytecode written
as each module is first imported (pip --no-compile, PYTHONDONTWRITEBYTECODE unset, as `make`
installs and runs): CPU seconds of the install, of the first process that imports what a train
job, an evaluation and the tracking import, and of the same process again.

On a machine that sets PYTHONDONTWRITEBYTECODE, bytecode compiled at install is the only bytecode
there is; without it each process would compile what it imports, every time ("no bytecode"
below, run once as the floor to avoid). Each round builds both venvs in turn (A, B, A, B ...)
from the pip cache, in a temporary folder, from the checkout's committed tree:

    .venv/bin/python benchmarks/install_bytecode.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from common import children_cpu, machine, markdown_table, median

ROOT = Path(__file__).resolve().parents[1]
PYTHON = "python3.11"
MODES = {"compiled at install": [], "written at first import": ["--no-compile"]}
IMPORTS = (
    "import klrl.cli; from transformers import LlamaForCausalLM, AutoTokenizer; "
    "import torch.distributed.fsdp; import lm_eval.evaluator; import mlflow.tracking"
)


def _cpu_of(command: list[str], cwd: Path, env: dict) -> float:
    before = children_cpu()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr[-2000:]}")
    return children_cpu() - before


def build_and_import(source: Path, venv: Path, flags: list[str], write_bytecode: bool) -> list[float]:
    """CPU seconds of the install into a fresh `venv`, then of the imports twice."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    if not write_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([PYTHON, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "--quiet", *flags, "--upgrade", "pip"], env=env, check=True)
    install = [python, "-m", "pip", "install", "--quiet", *flags, "-c", "requirements/constraints.txt", "-e", ".[test]"]
    figures = [_cpu_of(install, source, env)]
    figures += [_cpu_of([python, "-c", IMPORTS], source, env) for _ in range(2)]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)  # a round builds two venvs: about 5 min on 2 cores
    args = parser.parse_args()
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "source"
        source.mkdir()
        archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
        runs = {name: [] for name in MODES}
        for _ in range(args.rounds):
            for name, flags in MODES.items():
                runs[name].append(build_and_import(source, Path(tmp) / "venv", flags, write_bytecode=bool(flags)))
                print(f"  {name}: install, first and next import, CPU s: {runs[name][-1]}", flush=True)
        floor = build_and_import(source, Path(tmp) / "venv", ["--no-compile"], write_bytecode=False)
    rows = [[name] + [median(column) for column in zip(*figures)] for name, figures in runs.items()]
    rows.append(["no bytecode (once)"] + floor)
    rows = [row + [row[1] + row[2]] for row in rows]
    header = ["bytecode", "install CPU s", "first import CPU s", "next import CPU s", "install + first"]
    print(markdown_table(header, rows))
    print(f"machine after: {machine()}")


if __name__ == "__main__":
    main()
