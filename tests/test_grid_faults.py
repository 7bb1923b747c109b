"""kill -9 of the Snakemake grid itself: the whole process group mid-training, then Snakemake
alone with its trainer left running (an orphan). Each rerun, the same command without
`--unlock` (the dead Snakemake's locks are released), either refuses the
cell the orphan still holds, naming it, or ends with every cell equal to the same grid run once
uninterrupted, its metrics written once per step, the tables identical to that run's, and no
MLflow run left RUNNING."""

import contextlib
import json
import os
import signal
import sqlite3
import time

import pytest
import yaml
from fault_helpers import assert_same_cell, line_count, lock_holder, wait_for
from workflow_helpers import copy_workflow, load_config, snakemake, start_snakemake

from klrl.training.record import read_metrics, read_status

GRID_KILLS = 2  # the whole group once, Snakemake alone once
ORPHANS_REFUSED = 1  # the rerun's train job on the orphan's cell
CONFIG = "config/kill.yaml"
OUT = "results/ci-kill"
CELLS = ("tiny__k1-reward__b0.1__on__s0", "tiny__k3-loss__b0.1__off__s0")  # .test/config/test.yaml's


def _write_config(folder):
    """.test/config/test.yaml with steps long enough to be killed inside (checkpoints every 4)."""
    config = load_config("test") | {"experiment": "ci-kill"}
    config["train"] = config["train"] | {"steps": 40, "checkpoint_every": 4}
    (folder / CONFIG).write_text(yaml.safe_dump(config))


def _training(folder, at_least):
    """The cell whose trainer holds its lock with `at_least` metrics lines written, and its pid."""
    for cell in CELLS:
        train = folder / OUT / "cells" / cell / "train"
        pid = lock_holder(train / "train.lock")
        if pid and line_count(train / "metrics.jsonl") >= at_least:
            return cell, pid
    return None


def _store_writable(folder):
    """Whether a writer could commit to the MLflow store (SQLite) now."""
    try:
        with contextlib.closing(sqlite3.connect(folder / "results" / "mlflow.db", timeout=0.2)) as store:
            store.execute("BEGIN EXCLUSIVE")  # fails while any reader or writer holds the file
            store.rollback()
    except sqlite3.OperationalError:
        return False
    return True


def _stop_mid_training(folder, process, at_least=3):
    """Wait for a trainer `at_least` steps in, SIGSTOP it (it stays where it is), return (cell, pid).
    A trainer stopped inside its MLflow write would hold the store's lock for as long as it is
    stopped, which a live process never does: it is let on a few ms and stopped again."""
    wait_for(lambda: _training(folder, at_least) is not None, process)
    found = _training(folder, at_least)
    assert found, f"no trainer got {at_least} steps in: {(folder / 'snakemake.log').read_text()[-3000:]}"
    os.kill(found[1], signal.SIGSTOP)
    while not _store_writable(folder):
        os.kill(found[1], signal.SIGCONT)
        time.sleep(0.003)
        os.kill(found[1], signal.SIGSTOP)
    return found


def _alive(pid):
    try:
        state = next(line for line in open(f"/proc/{pid}/status") if line.startswith("State:"))
    except (OSError, StopIteration):
        return False
    return "Z" not in state  # a zombie (no init reaping in a container) has ended


def _rerun_beside_the_orphan_then_after_it(folder, args, orphan_cell, orphan):
    # 3. the same command while the orphan lives: its cell is refused, naming the orphan; the rest completes
    third = snakemake(folder, *args)
    assert third.returncode != 0
    refusal = (folder / OUT / "logs" / "train" / f"{orphan_cell}.log").read_text()
    assert f"in use by pid {orphan} on this host" in refusal, refusal[-2000:]
    others = [cell for cell in CELLS if cell != orphan_cell]
    assert all(read_status(folder / OUT / "cells" / cell / "train")["status"] == "completed" for cell in others)

    # 4. the orphan finishes its cell; the next run completes without training it again
    os.kill(orphan, signal.SIGCONT)
    wait_for(lambda: not _alive(orphan), seconds=600)
    orphan_folder = folder / OUT / "cells" / orphan_cell / "train"
    assert read_status(orphan_folder)["status"] == "completed"
    finished = [(orphan_folder / name).stat().st_mtime_ns for name in ("metrics.jsonl", "final/model.safetensors")]
    fourth = snakemake(folder, *args)
    assert fourth.returncode == 0, fourth.stderr[-3000:]
    assert [
        (orphan_folder / name).stat().st_mtime_ns for name in ("metrics.jsonl", "final/model.safetensors")
    ] == finished


@pytest.mark.slow
def test_kill_9_of_the_grid_and_of_snakemake_alone_then_reruns_equal_an_uninterrupted_run(tmp_path, monkeypatch):
    (tmp_path / "workflow").mkdir()
    folder = copy_workflow(tmp_path / "workflow")
    _write_config(folder)
    targets = [
        f"{OUT}/cells/{cell}/train/status.json" for cell in CELLS
    ]  # training only: no evaluation, tables or figures
    args = ("--profile", "profiles/local", "--cores", "1", "--configfile", CONFIG, "--", *targets)
    log = folder / "snakemake.log"

    # 1. the whole group (Snakemake and its job) killed in the middle of a training job
    first = start_snakemake(folder, *args, log=log)
    killed_cell, _ = _stop_mid_training(folder, first)
    os.killpg(first.pid, signal.SIGKILL)
    assert first.wait() == -signal.SIGKILL
    assert read_status(folder / OUT / "cells" / killed_cell / "train") is None

    # 2. the same command again, no --unlock (the dead Snakemake's locks are released: klrl.grid.snakemake_locks);
    # this time only Snakemake is killed: its trainer, stopped, is an orphan
    second = start_snakemake(folder, *args, log=log)
    orphan_cell, orphan = _stop_mid_training(
        folder, second, at_least=line_count(folder / OUT / "cells" / killed_cell / "train" / "metrics.jsonl") + 2
    )
    second.send_signal(signal.SIGKILL)
    assert second.wait() == -signal.SIGKILL and _alive(orphan)

    try:
        _rerun_beside_the_orphan_then_after_it(folder, args, orphan_cell, orphan)
    finally:
        if _alive(orphan):  # the test failed with the orphan still stopped: leave nothing behind
            os.kill(orphan, signal.SIGKILL)

    # 5. the rest of the grid (evaluation, tables), and the same grid run once, uninterrupted:
    # every cell the same, each step logged once, and the tables identical
    (tmp_path / "whole").mkdir()
    whole = copy_workflow(tmp_path / "whole")
    _write_config(whole)
    until_tables = ("--profile", "profiles/local", "--cores", "1", "--configfile", CONFIG, "--until", "aggregate")
    for run in (folder, whole):
        done = snakemake(run, *until_tables)
        assert done.returncode == 0, done.stderr[-3000:]
    for cell in CELLS:
        train = folder / OUT / "cells" / cell / "train"
        steps = [record["step"] for record in read_metrics(train / "metrics.jsonl")]
        assert steps == sorted(set(steps))
        assert_same_cell(train, whole / OUT / "cells" / cell / "train")
    for table in ("main.csv", "scores.csv"):
        assert (folder / OUT / "tables" / table).read_bytes() == (whole / OUT / "tables" / table).read_bytes(), table

    # and MLflow holds no run still RUNNING
    from mlflow.tracking import MlflowClient

    runs = json.loads((folder / OUT / "mlflow" / "runs.json").read_text())
    monkeypatch.chdir(folder)
    client = MlflowClient(runs["tracking_uri"])
    assert not client.search_runs([runs["experiment_id"]], "attributes.status = 'RUNNING'")
    for cell in CELLS:
        assert client.get_run(runs["runs"][cell]).info.status == "FINISHED"
