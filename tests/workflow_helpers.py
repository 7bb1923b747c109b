"""Running the workflow from tests: a fresh copy of its files, Snakemake in a subprocess, the
job counts it prints, the configs of config/, every figure script drawn from a tables folder, a
benchmark's or a tool's script imported as a module."""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from klrl.core.paths import WORKFLOW_FILES

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).parent / "snakemake"
# A machine config/paper.yaml loads on: 8 GPUs (faked: no job runs in a dry run) and a Hub token
# for its gated model (a stub: a dry run downloads nothing), with the Hub online.
PAPER_MACHINE = {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "HF_TOKEN": "stub", "HF_HUB_OFFLINE": ""}
FIGURES = sorted(
    path.stem for path in (ROOT / "paper_figures").glob("*.py")
)  # one figure per script, as figures.smk finds them


# Runs each figure script as `python paper_figures/<name>.py --tables T --out O` would, one after
# another in one interpreter (matplotlib and pandas imported once), its stderr and any traceback
# to O/<name>.stderr.
_DRAW = """
import contextlib, runpy, sys, traceback
root, tables, out, *figures = sys.argv[1:]
sys.path.insert(0, root + "/paper_figures")
for figure in figures:
    with open(f"{out}/{figure}.stderr", "w") as err, contextlib.redirect_stderr(err):
        sys.argv = [f"{root}/paper_figures/{figure}.py", "--tables", tables, "--out", out]
        try:
            runpy.run_path(sys.argv[0], run_name="__main__")
        except BaseException:
            traceback.print_exc()
"""


def draw_figures(tables: Path, out: Path) -> dict[str, str]:
    """Every figure script drawn from `tables` into `out`, in one subprocess; per figure, what it
    wrote on stderr (a failed script's traceback included)."""
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-c", _DRAW, str(ROOT), str(tables), str(out), *FIGURES], check=True, timeout=600)
    return {figure: (out / f"{figure}.stderr").read_text() for figure in FIGURES}


def load_config(name: str, overlay: str | None = None) -> dict:
    """config/<name>.yaml (or the tests' .test/config/<name>.yaml), with
    config/overlays/<overlay>.yaml merged over it as Snakemake merges a second --configfile."""
    (path,) = [path for path in (ROOT / "config", ROOT / ".test" / "config") if (path / f"{name}.yaml").exists()]
    config = yaml.safe_load((path / f"{name}.yaml").read_text())
    if overlay:
        from snakemake.utils import update_config

        update_config(config, yaml.safe_load((ROOT / "config" / "overlays" / f"{overlay}.yaml").read_text()))
    return config


def copy_workflow(folder: Path) -> Path:
    """The workflow's files (not the package, which is installed) in a fresh folder."""
    for name in WORKFLOW_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, folder / name)
        else:
            shutil.copy(source, folder / name)
    return folder


def _snakemake_env() -> dict:
    """The venv's bin first on PATH (rules call `python -m klrl`), no tracking URI from outside."""
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def snakemake(folder: Path, *args: str, timeout: int = 900, environ: dict | None = None) -> subprocess.CompletedProcess:
    """Snakemake run in `folder`, with `environ` added to the environment (CUDA_VISIBLE_DEVICES:
    a machine's GPU pool, faked)."""
    return subprocess.run(
        [str(SNAKEMAKE), *args],
        cwd=folder,
        capture_output=True,
        text=True,
        env=_snakemake_env() | (environ or {}),
        timeout=timeout,
        check=False,
    )


def start_snakemake(folder: Path, *args: str, log: Path) -> subprocess.Popen:
    """Snakemake in the background, leading a process group of its own (its jobs are in it)."""
    with log.open("ab") as handle:
        return subprocess.Popen(
            [str(SNAKEMAKE), *args],
            cwd=folder,
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=_snakemake_env(),
            start_new_session=True,
        )


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table of a Snakemake run or dry run."""
    lines = output[output.index("Job stats:") :].splitlines()[3:]
    counts = {}
    for line in lines:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
    return counts


def train_commands(output: str) -> list[str]:
    """How each train job's shell command (one line in `snakemake -n -p` output) starts `klrl train`."""
    return [line.strip().partition(" train ")[0] for line in output.splitlines() if " klrl train " in line]


def load_benchmark(name: str, folder: str = "benchmarks"):
    """benchmarks/<name>.py (or tools/<name>.py, folder "tools") imported as a module, its sibling
    modules importable as when the script runs."""
    path = str(ROOT / folder)
    if path not in sys.path:
        sys.path.insert(0, path)
    spec = importlib.util.spec_from_file_location(name, ROOT / folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
