"""Running the workflow from tests: a fresh copy of its files, Snakemake in a subprocess, the
job counts it prints, the configs of config/, an MLflow server over a store."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW_FILES = ("Snakefile", "workflow/rules", "workflow/schemas", "workflow/report", "config", "envs", "profiles", "paper_figures")
SNAKEMAKE = Path(sys.executable).parent / "snakemake"


def load_config(name: str) -> dict:
    return yaml.safe_load((ROOT / "config" / f"{name}.yaml").read_text())


def copy_workflow(folder: Path) -> Path:
    """The workflow's files (not the package, which is installed) in a fresh folder."""
    for name in WORKFLOW_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, folder / name)
        else:
            shutil.copy(source, folder / name)
    return folder


def snakemake(folder: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [str(SNAKEMAKE), *args], cwd=folder, capture_output=True, text=True, env=env, timeout=timeout, check=False
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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def mlflow_server(store_uri: str, cwd: Path, *options: str):
    """`mlflow server` over `store_uri` on a free port of 127.0.0.1, its address yielded once it
    answers /health; stopped with its whole process group, checked to leave nothing behind."""
    port = free_port()
    command = [str(Path(sys.executable).parent / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port), *options]
    command += ["--backend-store-uri", store_uri]
    server = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    address = f"http://127.0.0.1:{port}"
    try:
        for _ in range(180):
            try:
                with urllib.request.urlopen(f"{address}/health", timeout=2):
                    break
            except OSError:
                assert server.poll() is None, "mlflow server exited"
                time.sleep(1)
        else:
            raise AssertionError("mlflow server did not answer /health within 180 s")
        yield address
    finally:
        _stop_group(server)


def _group_alive(leader: int) -> bool:
    """Whether any process of the group still runs (zombies, already dead, do not count)."""
    listing = subprocess.run(["ps", "-e", "-o", "pgid=,stat="], capture_output=True, text=True, check=True)
    return any(pgid == str(leader) and not stat.startswith("Z") for pgid, stat in map(str.split, listing.stdout.splitlines()))


def _stop_group(process: subprocess.Popen) -> None:
    """SIGTERM the process group (the server and its workers), SIGKILL what outlives 20 s, then
    check that nothing of the group is left."""
    os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while _group_alive(process.pid) and time.monotonic() < deadline:
        process.poll()
        time.sleep(0.5)
    if _group_alive(process.pid):
        os.killpg(process.pid, signal.SIGKILL)
        time.sleep(1)
    process.wait(timeout=30)
    assert not _group_alive(process.pid), "the server left processes behind"
