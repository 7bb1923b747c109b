""".test/config/test.yaml through profiles/slurm on a one-node SLURM cluster that tests/slurm/cluster.sh
starts (as root; skipped elsewhere), every job logging to MLflow through a tracking server on
PostgreSQL with passwords (klrl.tracking.server), as the grid's jobs user: every job submitted by
sbatch with its config's resources, no password in anything the grid wrote (files, logs, MLflow
params, tags and artifacts) nor in the process list while it ran, the tables equal to a local run's, a GPU request rendered as the plugin's --gpus, and a train job
killed with scancel resubmitted and resumed from its checkpoint while the node is drained, in one
MLflow run whose metrics continue across the resume."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from mlflow.tracking import MlflowClient

from klrl.grid.expansion import eval_job_resources, expand_grid, job_resources
from klrl.core.paths import RUN_RECORD, WORKFLOW_FILES
from klrl.tracking.runs import KEY_TAG
from klrl.tracking.credentials import read_credentials
from klrl.tracking.mlflow_accounts import ADMIN_FILE, JOBS_FILE
from klrl.tracking.server import postgres_bin, tracking_server
from klrl.training.checkpoint import checkpoint_folders

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "tests" / "slurm" / "cluster.sh"
SNAKEMAKE = Path(sys.executable).parent / "snakemake"
PARTITIONS = {"KLRL_SLURM_ACCOUNT": "klrl", "KLRL_SLURM_PARTITION": "cpu", "KLRL_SLURM_GPU_PARTITION": "gpu"}
FAST = ("--slurm-init-seconds-before-status-checks", "2")  # the plugin's default waits 40 s before the first check
CONFIG = yaml.safe_load((ROOT / ".test" / "config" / "test.yaml").read_text())
PROFILE = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
LOCAL_RULES = {"track_grid", "cell_settings", "plan", "aggregate", "figure", "track_figures"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> dict:
    """The cluster's client environment; the daemons are stopped by PID afterwards, also on failure."""
    state = tmp_path_factory.mktemp("slurm")
    start = subprocess.run(
        [str(CLUSTER), "start", str(state)], capture_output=True, text=True, timeout=1200, check=False
    )
    if start.returncode == 77:
        pytest.skip(f"no SLURM test cluster here: {start.stderr.strip()}")
    try:
        assert start.returncode == 0, start.stderr[-3000:]
        path = f"{Path(sys.executable).parent}:{os.environ['PATH']}:/usr/sbin:/sbin"
        env = os.environ | PARTITIONS | {"SLURM_CONF": str(state / "slurm.conf"), "PATH": path, "OMP_NUM_THREADS": "1"}
        env.pop("MLFLOW_TRACKING_URI", None)
        yield env
    finally:
        subprocess.run([str(CLUSTER), "stop", str(state)], timeout=300, check=True)


@pytest.fixture(scope="module")
def tracking(cluster) -> dict:
    """The `tracking` section of an authenticated MLflow tracking server on PostgreSQL that every
    job logs to (its uri and the jobs' credentials file), and its STATE; under /tmp (as root
    PostgreSQL runs as `postgres`, which must reach it)."""
    try:
        postgres_bin()
    except OSError as missing:
        pytest.skip(str(missing))
    folder = Path(tempfile.mkdtemp(prefix="klrl-slurm-tracking-"))
    folder.chmod(0o755)
    try:
        with tracking_server(folder / "state", workers=2) as address:
            yield {"uri": address, "credentials": str(folder / "state" / JOBS_FILE), "state": folder / "state"}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _copy_workflow(folder: Path) -> Path:
    for name in WORKFLOW_FILES:
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, folder / name)
    return folder


def _run(command: list[str], env: dict, folder: Path | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def _jobs(env: dict, run: Path) -> pd.DataFrame:
    """Every SLURM job that ran in the folder `run` (sacct), with its rule from the comment the
    plugin gives each job (rule_<rule>_wildcards_<values>)."""
    fields = ["JobIDRaw", "WorkDir", "Comment", "Partition", "Account", "AllocCPUS", "ReqMem", "Timelimit", "State"]
    format_ = ",".join(f"{field}%400" for field in fields)
    out = _run(["sacct", "-X", "--parsable2", "--noheader", "-a", "-S", "now-1days", "-o", format_], env).stdout
    jobs = pd.DataFrame([line.split("|") for line in out.splitlines()], columns=fields)
    jobs = jobs[jobs["WorkDir"] == str(run)].copy()
    jobs["rule"] = jobs["Comment"].str.extract(r"^rule_(.+?)(?:_wildcards_.*)?$")[0]
    return jobs


def _outputs(folder: Path) -> Path:
    """The folder of a run's outputs, relative to the run: results/<experiment>/ or, in the older
    layout, results/ (the one that holds cells/)."""
    candidates = (Path("results") / CONFIG["experiment"], Path("results"))
    return next(path for path in candidates if (folder / path / "cells").is_dir())


def _table(folder: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(folder / _outputs(folder) / "tables" / name)


def _section(tracking: dict) -> dict:
    return {"uri": tracking["uri"], "credentials": tracking["credentials"]}


@pytest.fixture(scope="module")
def slurm_run(cluster, tracking, tmp_path_factory) -> Path:
    """.test/config/test.yaml end to end through profiles/slurm, tracked through the server; the
    command lines of every process, sampled while it runs, in <run>/processes.txt."""
    folder = _copy_workflow(tmp_path_factory.mktemp("slurm-run"))
    overlay = _overlay(folder, tracking=_section(tracking))
    command = [str(SNAKEMAKE), "--profile", "profiles/slurm", "--configfile", str(overlay), *FAST]
    with (folder / "snakemake.log").open("w") as log:
        snakemake = subprocess.Popen(command, cwd=folder, env=cluster, stdout=log, stderr=subprocess.STDOUT)
        with (folder / "processes.txt").open("w") as processes:
            while snakemake.poll() is None:
                processes.write(_run(["ps", "-eww", "-o", "args="], cluster).stdout)
                time.sleep(0.5)
    assert snakemake.wait(timeout=900) == 0, (folder / "snakemake.log").read_text()[-5000:]
    return folder


def _authenticate(monkeypatch, tracking: dict) -> None:
    """This test's MLflow clients log in as the grid's jobs user."""
    username, password = read_credentials(Path(tracking["credentials"]))
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", username)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", password)


def _mlflow_texts(tracking: dict, download: Path) -> list[str]:
    """Every param and tag of every run the jobs' user can see, and the text of every artifact."""
    client, texts = MlflowClient(tracking["uri"]), []
    for experiment in client.search_experiments():
        for run in client.search_runs([experiment.experiment_id]):
            texts += [f"{key}={value}" for key, value in (run.data.params | run.data.tags).items()]
            if client.list_artifacts(run.info.run_id):
                folder = client.download_artifacts(run.info.run_id, "", str(download / run.info.run_id))
                texts += [path.read_bytes().decode("latin-1") for path in Path(folder).rglob("*") if path.is_file()]
    return texts


@pytest.mark.slow
def test_no_password_reaches_a_file_a_log_mlflow_or_the_process_list(tracking, slurm_run, tmp_path, monkeypatch):
    _authenticate(monkeypatch, tracking)
    state = tracking["state"]
    passwords = [read_credentials(state / name)[1] for name in (JOBS_FILE, ADMIN_FILE)]
    passwords.append((state / "postgres.pgpass").read_text().strip().rsplit(":", 1)[1])
    texts = _mlflow_texts(tracking, tmp_path)
    assert len(texts) > 20 and any("klrl.key=grid" == text for text in texts)
    files = [path for path in slurm_run.rglob("*") if path.is_file() and not path.is_symlink()]
    files += [state / "postgres.log"]
    assert any(path.suffix == ".log" for path in files)
    processes = (slurm_run / "processes.txt").read_text()  # the jobs ran while sampled, given the file's path
    assert "python -m klrl train" in processes and f"--credentials {tracking['credentials']}" in processes
    for password in passwords:
        assert not [text for text in texts if password in text]
        assert not [path for path in files if password.encode() in path.read_bytes()]


@pytest.mark.slow
def test_every_cluster_job_got_its_configured_resources(cluster, slurm_run):
    jobs = _jobs(cluster, slurm_run)
    assert set(jobs["State"]) == {"COMPLETED"} and set(jobs["Account"]) == {"klrl"}
    cells = expand_grid(CONFIG)
    assert sorted(jobs["rule"]) == sorted(
        ["train"] * len(cells)
        + ["evaluate"] * len(cells)
        + ["evaluate_base", "build_base", "toy_bias"]
        + ["prepare_data"] * 2
    )
    assert not LOCAL_RULES & set(jobs["rule"])
    train, evaluate = job_resources(CONFIG, "tiny"), eval_job_resources(CONFIG, "tiny")
    defaults = PROFILE["default-resources"]
    expected = {  # partition, CPUs, memory, time limit
        "train": ("gpu", train["threads"], train["mem_mb"], train["runtime"]),
        "evaluate": ("gpu", evaluate["threads"], evaluate["mem_mb"], evaluate["runtime"]),
        "evaluate_base": ("gpu", evaluate["threads"], evaluate["mem_mb"], evaluate["runtime"]),
        "build_base": ("cpu", 1, 4000, 120),  # workflow/rules/models.smk
        "toy_bias": ("cpu", 1, defaults["mem_mb"], defaults["runtime"]),
        "prepare_data": ("cpu", 1, defaults["mem_mb"], defaults["runtime"]),
    }
    assert (evaluate["mem_mb"], evaluate["runtime"]) != (train["mem_mb"], train["runtime"])  # evaluation.jobs arrived
    for _, job in jobs.iterrows():
        partition, cpus, mem_mb, minutes = expected[job["rule"]]
        limit = f"{minutes // 60:02d}:{minutes % 60:02d}:00"
        assert (job["Partition"], int(job["AllocCPUS"]), job["ReqMem"], job["Timelimit"]) == (
            partition,
            cpus,
            f"{mem_mb}M",
            limit,
        ), job["rule"]


@pytest.mark.slow
def test_the_cluster_run_equals_the_local_run(slurm_run, ci_run_tables):
    """The same config run locally is the suite's CI grid (tests/conftest.py `ci_run`)."""
    for table in ("main.csv", "scores.csv"):
        local = pd.read_csv(ci_run_tables / table)
        pd.testing.assert_frame_equal(_table(slurm_run, table), local, check_exact=True)
    for cell in expand_grid(CONFIG).values():  # each job's own log, where docs/troubleshooting.md says
        for rule in ("train", "evaluate"):
            assert (slurm_run / _outputs(slurm_run) / "logs" / rule / f"{cell.id}.log").stat().st_size > 0


def _overlay(folder: Path, **sections) -> Path:
    config = yaml.safe_load((folder / ".test" / "config" / "test.yaml").read_text())
    for section, values in sections.items():
        config[section] = config.get(section, {}) | values
    path = folder / "config" / "overlay.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.slow
def test_a_gpu_job_asks_sbatch_for_gpus_on_the_gpu_partition(cluster, slurm_run, tmp_path):
    folder = shutil.copytree(slurm_run, tmp_path / "run", symlinks=True)
    overlay = _overlay(folder, jobs={"gpus": 2})
    cell = next(iter(expand_grid(yaml.safe_load(overlay.read_text())).values()))
    target = str(_outputs(folder) / "cells" / cell.id / "train" / "status.json")
    result = _run(
        [str(SNAKEMAKE), "--profile", "profiles/slurm", "--configfile", str(overlay), "--retries", "0", *FAST, target],
        cluster,
        folder,
    )
    assert result.returncode != 0  # this cluster has no GPUs: sbatch refuses the job
    output = result.stdout + result.stderr
    assert "SLURM sbatch failed" in output and "Invalid generic resource (gres) specification" in output
    (call,) = {line.strip() for line in output.splitlines() if line.strip().startswith("sbatch --")}
    assert " -p gpu " in call and call.count("--gpus=2") == 1 and " -A klrl " in call
    assert "--cpus-per-task=1" in call and "--mem 2000" in call and " -t 10 " in call


def _squeue(env: dict, fmt: str) -> list[list[str]]:
    return [line.split("|") for line in _run(["squeue", "-h", "-o", fmt], env).stdout.splitlines()]


def _wait(condition, seconds: int, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.3)
    pytest.fail(f"{what} within {seconds} s")


@pytest.mark.slow
def test_a_cancelled_train_job_is_resubmitted_and_resumes_through_a_drain(
    cluster, tracking, slurm_run, tmp_path, monkeypatch
):
    folder = shutil.copytree(slurm_run, tmp_path / "run", symlinks=True)
    steps = 30
    # Other steps than the grid's run: a new attempt of the cell, in a new MLflow run
    overlay = _overlay(folder, train={"steps": steps, "checkpoint_every": 1}, tracking=_section(tracking))
    cell = next(iter(expand_grid(yaml.safe_load(overlay.read_text())).values()))
    target = _outputs(folder) / "cells" / cell.id / "train" / "status.json"
    train = folder / target.parent
    command = [str(SNAKEMAKE), "--profile", "profiles/slurm", "--configfile", str(overlay), "--retries", "1", *FAST]
    log = (tmp_path / "snakemake.log").open("w")
    snakemake = subprocess.Popen([*command, str(target)], cwd=folder, env=cluster, stdout=log, stderr=subprocess.STDOUT)
    node = _run(["hostname", "-s"], cluster).stdout.strip()
    try:
        first = _wait(
            lambda: [job for job, state in _squeue(cluster, "%i|%T") if state == "RUNNING"], 300, "no train job ran"
        )[0]
        _wait(lambda: checkpoint_folders(train), 300, "the train job wrote no checkpoint")
        assert _run(["scancel", first], cluster).returncode == 0
        assert (
            _run(["scontrol", "update", f"nodename={node}", "state=drain", "reason=klrl-test"], cluster).returncode == 0
        )
        _wait(lambda: not [job for (job,) in _squeue(cluster, "%i") if job == first], 60, "the cancelled job stayed")
        # The checkpoint the retry resumes from: the newest committed one (a cancel mid-write
        # leaves a step-<n>.tmp folder, which the trainer does not read).
        committed = checkpoint_folders(train)
        assert committed, "the train job finished before it was cancelled"
        reached = int(committed[0].name.removeprefix("step-"))
        before = [
            line for line in (train / "metrics.jsonl").read_text().splitlines() if json.loads(line)["step"] < reached
        ]
        retry = _wait(
            lambda: [row for row in _squeue(cluster, "%i|%T|%r") if row[0] != first], 180, "the job was not resubmitted"
        )[0]
        assert retry[1] == "PENDING", retry  # the node is drained
        assert _run(["scontrol", "update", f"nodename={node}", "state=resume"], cluster).returncode == 0
        assert snakemake.wait(timeout=600) == 0, (tmp_path / "snakemake.log").read_text()[-5000:]
    finally:
        _run(["scontrol", "update", f"nodename={node}", "state=resume"], cluster)
        if snakemake.poll() is None:
            snakemake.terminate()
            snakemake.wait(timeout=120)
    output = (tmp_path / "snakemake.log").read_text()
    assert f"SLURM-job '{first}' failed, SLURM status is: 'CANCELLED'" in output
    assert yaml.safe_load((train / "status.json").read_text())["status"] == "completed"
    lines = (train / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == list(range(steps + 1))
    assert (
        0 < reached < steps and lines[: len(before)] == before
    )  # the steps before the checkpoint kept their timings: resumed
    assert list(
        (folder / ".snakemake" / "slurm_logs" / "rule_train").rglob(f"{first}.log")
    )  # a failed job's SLURM log is kept
    # MLflow: the grid's run superseded by this attempt's, one run across the cancel, each step once
    _authenticate(monkeypatch, tracking)
    record, client = json.loads((train / RUN_RECORD).read_text()), MlflowClient(tracking["uri"])
    runs = {
        run.info.run_id: run for run in client.search_runs([record["experiment_id"]], f"tags.`{KEY_TAG}` = '{cell.id}'")
    }
    attempt = runs.pop(record["run_id"])
    assert attempt.info.status == "FINISHED" and attempt.data.tags["klrl.attempt_number"] == "2"
    assert [run.data.tags["klrl.status"] for run in runs.values()] == ["superseded"]
    records = [json.loads(line) for line in lines]
    for key in ("rollout/reward_mean", "kl/k1", "loss/total"):
        logged = sorted((point.step, point.value) for point in client.get_metric_history(record["run_id"], key))
        assert logged == [(row["step"], pytest.approx(row[key])) for row in records if key in row], key
