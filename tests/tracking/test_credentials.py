"""Credentials files of the tracking server (klrl.tracking.credentials): created owner-only,
refused in one line when others may read them or when malformed, applied through MLflow's
client variables, named by KLRL_TRACKING_CREDENTIALS before the config; a server that cannot be
reached is one line naming the URI and the reason, and a grid stops on it at Snakemake's load and
before its runs file."""

import os
import stat
import subprocess
import sys

import pytest
import yaml

from klrl.tracking.credentials import (
    credentials_path,
    read_credentials,
    server_problem,
    use_credentials,
    write_credentials,
    write_secret,
)
from klrl.tracking.mlflow_process import free_port
from workflow_helpers import copy_workflow, load_config, snakemake


def test_a_secret_is_owner_only_from_its_creation_and_never_overwritten(tmp_path):
    os.umask(0o022)
    write_secret(tmp_path / "secret", "s3cr3t")
    assert stat.S_IMODE((tmp_path / "secret").stat().st_mode) == 0o600
    with pytest.raises(FileExistsError):
        write_secret(tmp_path / "secret", "other")
    assert (tmp_path / "secret").read_text() == "s3cr3t"


def test_a_credentials_file_round_trips_and_sets_mlflows_client_variables(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    write_credentials(tmp_path / "jobs.credentials", "klrl-jobs", "pa=ss:word%")
    assert read_credentials(tmp_path / "jobs.credentials") == ("klrl-jobs", "pa=ss:word%")
    use_credentials(tmp_path / "jobs.credentials")
    assert (os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"]) == (
        "klrl-jobs",
        "pa=ss:word%",
    )


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620])
def test_a_credentials_file_others_may_open_is_refused_in_one_line(tmp_path, mode):
    path = tmp_path / "jobs.credentials"
    write_credentials(path, "klrl-jobs", "secret-value")
    path.chmod(mode)
    with pytest.raises(ValueError) as refused:
        read_credentials(path)
    assert str(refused.value) == f"{path}: readable by others (mode {mode:04o}); `chmod 600 {path}` first"
    assert "secret-value" not in str(refused.value)


def test_a_missing_or_malformed_credentials_file_is_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"^.*absent: cannot read the credentials \(No such file or directory\)$"):
        read_credentials(tmp_path / "absent")
    write_secret(tmp_path / "bad", "[mlflow]\nmlflow_tracking_username = me\n")
    with pytest.raises(ValueError, match=r"bad: not a credentials file \(\[mlflow\] with mlflow_tracking_username"):
        read_credentials(tmp_path / "bad")


def test_the_environment_names_the_credentials_before_the_config(tmp_path, monkeypatch):
    monkeypatch.delenv("KLRL_TRACKING_CREDENTIALS", raising=False)
    assert credentials_path(None) is None
    monkeypatch.chdir(tmp_path)
    assert credentials_path("config.credentials") == tmp_path / "config.credentials"
    monkeypatch.setenv("KLRL_TRACKING_CREDENTIALS", str(tmp_path / "env.credentials"))
    assert credentials_path("config.credentials") == tmp_path / "env.credentials"


def test_an_unreachable_server_is_one_line_naming_it_and_a_store_is_not_checked(tmp_path):
    uri = f"http://127.0.0.1:{free_port()}"
    assert server_problem(uri, None) == f"tracking server {uri}: unreachable ([Errno 111] Connection refused)"
    assert server_problem(f"sqlite:///{tmp_path}/mlflow.db", tmp_path / "absent") == ""


def test_track_grid_stops_before_its_runs_file_on_an_unreachable_server_or_an_open_credentials_file(tmp_path):
    write_credentials(tmp_path / "jobs.credentials", "klrl-jobs", "secret-value")
    uri = f"http://127.0.0.1:{free_port()}"
    command = [sys.executable, "-m", "klrl", "track-grid", "--experiment", "e", "--uri", uri]
    command += ["--credentials", str(tmp_path / "jobs.credentials"), "--out", str(tmp_path / "runs.json")]
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("MLFLOW_", "KLRL_"))}
    unreachable = subprocess.run(command, capture_output=True, text=True, env=environment)
    (tmp_path / "jobs.credentials").chmod(0o644)
    opened = subprocess.run(command, capture_output=True, text=True, env=environment)
    for done, reason in (
        (unreachable, "unreachable ([Errno 111] Connection refused)"),
        (opened, f"{tmp_path}/jobs.credentials: readable by others (mode 0644)"),
    ):
        assert done.returncode != 0 and not (tmp_path / "runs.json").exists()
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith(f"klrl track-grid: error: tracking server {uri}: {reason}"), line


@pytest.mark.slow
def test_snakemake_stops_at_load_in_one_line_when_the_tracking_server_is_unreachable(tmp_path):
    folder = copy_workflow(tmp_path)
    config = load_config("test")
    uri = f"http://127.0.0.1:{free_port()}"
    config["tracking"] = {"uri": uri, "credentials": str(tmp_path / "jobs.credentials")}
    write_credentials(tmp_path / "jobs.credentials", "klrl-jobs", "secret-value")
    (folder / "tracked.yaml").write_text(yaml.safe_dump(config))
    result = snakemake(folder, "-n", "--configfile", "tracked.yaml")
    assert result.returncode != 0 and not (folder / "results").exists()
    assert (result.stdout + result.stderr).strip() == (
        f"tracking server {uri}: unreachable ([Errno 111] Connection refused)"
    )
