"""MLflow follows the cell's files: a changed setting is a new attempt with a new run (the old
one kept, marked superseded, its files under superseded/), a killed run is ended by
`klrl track-reconcile` and continued by a re-run, metrics carry wall-clock timestamps, runs
carry the git commit, and a diverged cell is FINISHED with its reason. Checked through the
REST API of a local `mlflow server` (127.0.0.1), and with a SQLite store for the unit cases."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from argparse import Namespace
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from klrl.cli import main as klrl
from klrl.tracking.experiment import track_grid
from klrl.tracking.reconcile import reconcile
from klrl.training.attempt import begin_attempt
from klrl.training.checkpoint import checkpoint_folders
from klrl.training.config import TrainConfig
from klrl.tracking.attempt_runs import tracker_from_args
from klrl.tracking.runs import Tracker
from klrl.training.record import write_status
from klrl.core.typed import from_mapping
from klrl.tracking.mlflow_process import mlflow_server as serve_mlflow

from conftest import tiny_settings

CELL = "tiny__k3-loss__b0.1__on__s0"


def _settings(tiny_base, arith_data, **overrides) -> dict:
    small = {
        "prompts_per_step": 2,
        "group_size": 2,
        "max_new_tokens": 4,
        "eval_size": 2,
        "checkpoint_every": 1,
        "threads": 1,
    }
    return tiny_settings(tiny_base, arith_data, "k3-loss", 0.1, **(small | overrides))


def _write_config(path: Path, settings: dict) -> Path:
    path.write_text(yaml.safe_dump(settings))
    return path


def _git_head() -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`mlflow server` on a free port of 127.0.0.1 over a fresh SQLite store; stopped with its workers."""
    root = tmp_path_factory.mktemp("mlflow")
    with serve_mlflow(f"sqlite:///{root}/mlflow.db", root, "--workers", "1") as address:
        yield address


def _rest(address: str, endpoint: str, body: dict | None = None) -> dict:
    """A call of MLflow's REST API: POST with a JSON body, or GET with `body` as the query."""
    url = f"{address}/api/2.0/mlflow/{endpoint}"
    if endpoint.endswith("search"):
        request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    else:
        request = urllib.request.Request(url + "?" + "&".join(f"{key}={value}" for key, value in (body or {}).items()))
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _cell_runs(address: str, experiment_id: str) -> dict[str, dict]:
    """The cell's runs by run id: status and tags, from runs/search."""
    runs = _rest(address, "runs/search", {"experiment_ids": [experiment_id], "filter": f"tags.`klrl.key` = '{CELL}'"})[
        "runs"
    ]
    return {
        run["info"]["run_id"]: {
            "status": run["info"]["status"],
            "name": run["info"]["run_name"],
            "tags": {t["key"]: t["value"] for t in run["data"]["tags"]},
        }
        for run in runs
    }


def _grid(tmp_path, uri, experiment):
    runs_file = tmp_path / "runs.json"
    record = track_grid(experiment, uri, [CELL], runs_file, {CELL: "on-policy"})
    return runs_file, record


def _train(config, out, runs_file):
    return klrl(
        ["train", "--config", str(config), "--out", str(out), "--mlflow-runs", str(runs_file), "--mlflow-key", CELL]
    )


@pytest.mark.slow
def test_a_changed_setting_is_a_new_run_and_the_old_one_is_kept_superseded(
    server, tiny_base, arith_data, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    runs_file, grid = _grid(tmp_path, server, "attempts")
    out = tmp_path / "cells" / CELL / "train"
    started = time.time()
    assert _train(_write_config(tmp_path / "a.yaml", _settings(tiny_base, arith_data)), out, runs_file) == 0
    (out / "settings.json").write_text("{}\n")  # the workflow's settings file lives beside the attempt's files
    assert _train(_write_config(tmp_path / "b.yaml", _settings(tiny_base, arith_data, lr=2e-2)), out, runs_file) == 0
    ended = time.time()

    runs = _cell_runs(server, grid["experiment_id"])
    first = grid["runs"][CELL]
    (second,) = set(runs) - {first}
    assert runs[first]["status"] == "KILLED" and runs[second]["status"] == "FINISHED"
    assert runs[first]["tags"]["klrl.status"] == "superseded" and runs[first]["tags"]["klrl.superseded_by"] == second
    assert runs[first]["name"] == f"{CELL} (attempt 1, superseded)" and runs[second]["name"] == CELL
    assert runs[second]["tags"]["klrl.status"] == "completed" and runs[second]["tags"]["klrl.attempt_number"] == "2"
    assert runs[second]["tags"]["mlflow.parentRunId"] == grid["runs"]["grid"]
    assert {key: runs[second]["tags"][key] for key in ("model", "kl", "beta", "policy", "seed", "group")} == {
        "model": "tiny",
        "kl": "k3-loss",
        "beta": "0.1",
        "policy": "on",
        "seed": "0",
        "group": "on-policy",
    }
    assert runs[second]["tags"]["mlflow.source.git.commit"] == _git_head()
    # the old attempt's files, whole, under superseded/1/; the new one in place; the settings file untouched
    old = out / "superseded" / "1"
    assert (
        yaml.safe_load((old / "config.yaml").read_text())["lr"] == 1e-2
        and yaml.safe_load((out / "config.yaml").read_text())["lr"] == 2e-2
    )
    assert (
        json.loads((old / "status.json").read_text())["status"] == "completed"
        and (old / "final" / "config.json").is_file()
    )
    assert (
        len((old / "metrics.jsonl").read_text().splitlines())
        == 3
        == len((out / "metrics.jsonl").read_text().splitlines())
    )
    assert json.loads((old / "mlflow_run.json").read_text())["run_id"] == first
    assert json.loads((out / "mlflow_run.json").read_text())["run_id"] == second
    assert (out / "settings.json").read_text() == "{}\n"
    # the evaluate job of the cell logs into the new attempt's run
    arguments = Namespace(mlflow_runs=runs_file, mlflow_key=CELL, mlflow_run_id=None)
    assert tracker_from_args(arguments, cell_folder=out).run_id == second
    # metrics at the wall-clock time of logging
    history = _rest(server, "metrics/get-history", {"run_id": second, "metric_key": "rollout/reward_mean"})["metrics"]
    assert [point["step"] for point in history] == [0, 1]
    assert all(started * 1000 <= point["timestamp"] <= ended * 1000 for point in history)
    # re-running the grid's tracking maps the cell to its current run
    assert track_grid("attempts", server, [CELL], runs_file, {CELL: "on-policy"})["runs"][CELL] == second


@pytest.mark.slow
def test_a_killed_trainer_is_ended_by_reconcile_and_a_rerun_continues_its_run(
    server, tiny_base, arith_data, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    runs_file, grid = _grid(tmp_path, server, "kills")
    out = tmp_path / "cells" / CELL / "train"
    config = _write_config(tmp_path / "cell.yaml", _settings(tiny_base, arith_data, steps=12, checkpoint_every=3))
    command = [
        sys.executable,
        "-m",
        "klrl",
        "train",
        "--config",
        str(config),
        "--out",
        str(out),
        "--mlflow-runs",
        str(runs_file),
        "--mlflow-key",
        CELL,
    ]
    with (tmp_path / "train.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while not _logged_past_checkpoint(out, 2) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, (tmp_path / "train.log").read_text()[-2000:]
    assert _logged_past_checkpoint(out, 1)  # the resume recomputes steps the killed job logged
    run_id = grid["runs"][CELL]
    assert _cell_runs(server, grid["experiment_id"])[run_id]["status"] == "RUNNING"

    assert reconcile(runs_file, tmp_path) == {
        f"{CELL} ({run_id})": "killed",
        f"grid ({grid['runs']['grid']})": "completed",
    }
    assert _cell_runs(server, grid["experiment_id"])[run_id]["status"] == "KILLED"
    assert reconcile(runs_file, tmp_path) == {}  # idempotent

    assert _train(config, out, runs_file) == 0
    runs = _cell_runs(server, grid["experiment_id"])
    assert (
        list(runs) == [run_id]
        and runs[run_id]["status"] == "FINISHED"
        and runs[run_id]["tags"]["klrl.status"] == "completed"
    )
    assert not (out / "superseded").exists()
    # the run's metrics continue across the kill: each step once, the values of metrics.jsonl
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    for key in ("rollout/reward_mean", "kl/k1", "periodic_eval/pass@1"):
        history = _rest(server, "metrics/get-history", {"run_id": run_id, "metric_key": key.replace("@", "_at_")})[
            "metrics"
        ]
        logged = sorted((point["step"], point["value"]) for point in history)
        assert logged == [(record["step"], pytest.approx(record[key])) for record in records if key in record], key


def _logged_past_checkpoint(out: Path, steps: int) -> bool:
    """Whether metrics.jsonl holds at least `steps` steps past the newest committed checkpoint."""
    folders, metrics = checkpoint_folders(out), out / "metrics.jsonl"
    if not folders or not metrics.exists():
        return False
    covered = int(folders[0].name.removeprefix("step-"))
    return len(metrics.read_bytes().splitlines()) >= covered + steps


@pytest.mark.slow
def test_a_diverged_cell_is_finished_with_its_reason(tmp_path, monkeypatch):
    """The trainer's end of a diverged cell, and reconcile's of one killed right after its
    status.json (before MLflow was told): FINISHED, tagged diverged with the reason."""
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    other = "tiny__k1-reward__b0.1__on__s0"
    record = track_grid("diverged", uri, [CELL, other], tmp_path / "runs.json", {CELL: "on-policy", other: "on-policy"})
    Tracker.from_runs_file(tmp_path / "runs.json", other).finish("diverged", "non-finite loss or gradient at step 3")
    client = MlflowClient(uri)
    client.update_run(record["runs"][CELL], status="RUNNING")  # its trainer started, then was killed
    folder = tmp_path / "cells" / CELL / "train"
    (folder / "final").mkdir(parents=True)
    (folder / "final" / "config.json").write_text("{}")
    write_status(folder, "diverged", 5, "collapse at step 5: accuracy 0.010 over the last 2 steps, 0.500 at the start")
    assert reconcile(tmp_path / "runs.json", tmp_path)[f"{CELL} ({record['runs'][CELL]})"] == "diverged"
    for key, reason in (
        (other, "non-finite loss or gradient at step 3"),
        (CELL, "collapse at step 5: accuracy 0.010 over the last 2 steps, 0.500 at the start"),
    ):
        run = client.get_run(record["runs"][key])
        assert run.info.status == "FINISHED"
        assert (run.data.tags["klrl.status"], run.data.tags["klrl.diverged_reason"]) == ("diverged", reason)


def test_reconcile_leaves_a_live_trainers_run_and_sets_unstarted_ones_back_to_scheduled(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    unstarted = "tiny__k1-reward__b0.1__on__s0"
    record = track_grid(
        "alive", uri, [CELL, unstarted], tmp_path / "runs.json", {CELL: "on-policy", unstarted: "on-policy"}
    )
    client = MlflowClient(uri)
    assert {client.get_run(record["runs"][key]).info.status for key in (CELL, unstarted)} == {"SCHEDULED"}
    for key in (CELL, unstarted):  # as a store of older code left them
        client.update_run(record["runs"][key], status="RUNNING")
    folder = tmp_path / "cells" / CELL / "train"
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text("steps: 2\n")
    (folder / "train.lock").write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": "now"}))
    assert reconcile(tmp_path / "runs.json", tmp_path) == {
        f"{unstarted} ({record['runs'][unstarted]})": "scheduled",
        f"grid ({record['runs']['grid']})": "completed",
    }
    assert client.get_run(record["runs"][CELL]).info.status == "RUNNING"
    assert client.get_run(record["runs"][unstarted]).info.status == "SCHEDULED"


def test_only_a_change_of_what_is_computed_starts_a_new_attempt(tmp_path):
    """Threads or device are how, not what: the same attempt. A changed lr moves the files; a move
    cut short (config.yaml, moved last, still in place) is finished into the same folder."""
    settings = {"base_model": "m", "train_data": "t.jsonl", "eval_data": "e.jsonl", "reward": "arithmetic", "lr": 1e-2}
    folder = tmp_path / "train"
    assert begin_attempt(folder, from_mapping(TrainConfig, settings, "test")) is None
    (folder / "metrics.jsonl").write_text('{"step": 0}\n')
    assert begin_attempt(folder, from_mapping(TrainConfig, settings | {"threads": 3, "device": "cuda"}, "test")) is None
    assert yaml.safe_load((folder / "config.yaml").read_text())["threads"] == 3 and (folder / "metrics.jsonl").exists()
    (folder / "final").mkdir()
    (folder / "superseded" / "1").mkdir(parents=True)
    os.replace(folder / "final", folder / "superseded" / "1" / "final")  # as a kill in the middle of the move leaves it
    assert (
        begin_attempt(folder, from_mapping(TrainConfig, settings | {"lr": 2e-2}, "test")) == folder / "superseded" / "1"
    )
    assert sorted(path.name for path in (folder / "superseded" / "1").iterdir()) == [
        "config.yaml",
        "final",
        "metrics.jsonl",
    ]
    assert sorted(path.name for path in folder.iterdir()) == ["config.yaml", "superseded"]
    assert yaml.safe_load((folder / "config.yaml").read_text())["lr"] == 2e-2
    assert begin_attempt(folder, from_mapping(TrainConfig, settings, "test")) == folder / "superseded" / "2"
