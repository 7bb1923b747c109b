"""Fault injection: kills, crashes at known points, torn, empty and crafted files, two writers.

Every case ends in one of two ways: the final weights and metrics (or evaluation results) equal
an uninterrupted run's, or a clear one-line refusal. The counts docs/reliability.md's fault suite
section states are computed from this file's lists and tests/test_hostile_inputs.py's
(`suite_counts`, with tests/test_grading_faults.py's and tests/test_grid_faults.py's), written there by
tests/fault_counts.py and checked against it.
"""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import warnings

import pytest
import yaml

from fault_helpers import assert_same_cell, line_count, lock_holder, wait_for
from test_checkpoint_files import CORRUPT_CHECKPOINTS, CRAFTED_FILES, newest_checkpoint
from test_grading_faults import KILLED_GRADERS
from test_grid_faults import GRID_KILLS, ORPHANS_REFUSED
from test_hostile_inputs import DEADLINE_TOWERS, EDITED_DATA, HOSTILE_COMPLETIONS, HOSTILE_ROWS, USER_MISTAKES

from klrl.cli import main as klrl
from klrl.core.folder_lock import FolderLocked, hold_lock
from klrl.training import trainer as trainer_module
from klrl.training.record import MetricsLog, read_metrics, read_status

from conftest import tiny_settings

SLOW = pytest.mark.slow


class Crash(BaseException):
    """Stands for the process dying: nothing after it runs, the files stay as they are."""


def _settings(tiny_base, arith_data, **overrides) -> dict:
    return tiny_settings(
        tiny_base,
        arith_data,
        "k3-loss",
        0.1,
        **({"steps": 8, "eval_every": 4, "checkpoint_every": 2, "async_lag": 1, "threads": 1} | overrides),
    )


@pytest.fixture(scope="module")
def cell_config(tiny_base, arith_data, tmp_path_factory):
    path = tmp_path_factory.mktemp("config") / "cell.yaml"
    path.write_text(yaml.safe_dump(_settings(tiny_base, arith_data)))
    return path


@pytest.fixture(scope="module")
def whole(cell_config, tmp_path_factory):
    """An uninterrupted `klrl train` of the cell: the reference every faulted run must equal."""
    out = tmp_path_factory.mktemp("whole") / "train"
    assert klrl(["train", "--config", str(cell_config), "--out", str(out)]) == 0
    return out


# --- faults at known points of a training run (in process: the crash leaves files as a kill would)


def _after_checkpoint(step, damage):
    save = trainer_module.save_checkpoint

    def save_then_crash(folder, state, **collective):
        save(folder, state, **collective)
        if state["step"] == step:
            damage(folder)
            raise Crash

    return "save_checkpoint", save_then_crash


def _torn_shards(folder):
    path = newest_checkpoint(folder) / "__0_0.distcp"
    os.truncate(path, path.stat().st_size // 2)


def _torn_index(folder):
    path = newest_checkpoint(folder) / ".metadata"
    os.truncate(path, path.stat().st_size // 2)


def _uncommitted_checkpoint(folder):  # killed before the rename: only the older one is committed
    newest = newest_checkpoint(folder)
    newest.rename(newest.with_name(newest.name + ".tmp"))


def _torn_metrics(folder):
    with (folder / "metrics.jsonl").open("ab") as handle:
        handle.write(b'{"step": 4, "rollout/accur')


def _at_status(damage):
    write = trainer_module.write_status

    def write_then_crash(folder, *args):
        if damage is not _partial_final:
            write(folder, *args)
        damage(folder)
        raise Crash

    return "write_status", write_then_crash


def _nothing(folder):  # killed right after status.json: checkpoints left, MLflow not told
    pass


def _empty_status(folder):
    (folder / "status.json").write_text("")


def _partial_final(folder):  # killed while writing final/, before status.json
    os.truncate(folder / "final" / "model.safetensors", 100)


FILE_FAULTS = {
    "checkpoint shards torn": _after_checkpoint(4, _torn_shards),
    "checkpoint index torn": _after_checkpoint(4, _torn_index),
    "checkpoint not committed": _after_checkpoint(4, _uncommitted_checkpoint),
    "metrics line torn": _after_checkpoint(6, _torn_metrics),
    "killed after status.json": _at_status(_nothing),
    "status.json empty": _at_status(_empty_status),
    "final/ half written": _at_status(_partial_final),
}


@pytest.mark.parametrize("fault", FILE_FAULTS.values(), ids=FILE_FAULTS.keys())
def test_a_crash_at_a_known_point_resumes_to_the_same_cell(cell_config, whole, tmp_path, monkeypatch, fault):
    out = tmp_path / "train"
    with monkeypatch.context() as patch:
        patch.setattr(trainer_module, *fault)
        with pytest.raises(Crash):
            klrl(["train", "--config", str(cell_config), "--out", str(out)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the skipped file's warning; its text is tested below
        assert klrl(["train", "--config", str(cell_config), "--out", str(out)]) == 0
    assert_same_cell(out, whole)


# --- torn, empty and crafted files, one by one


def test_metrics_keep_whole_records_and_cut_a_torn_tail(tmp_path):
    path = tmp_path / "metrics.jsonl"
    lines = [json.dumps({"step": step, "x": step / 3}) + "\n" for step in range(5)]
    path.write_text("".join(lines) + '{"step": 5, "x"')
    with pytest.warns(UserWarning, match=r"metrics\.jsonl:6: torn last line"):
        assert [r["step"] for r in read_metrics(path)] == [0, 1, 2, 3, 4]
    with pytest.warns(UserWarning):
        MetricsLog(path, keep_steps_below=3).append({"step": 3, "x": 1.0})
    assert path.read_text() == "".join(lines[:3]) + json.dumps({"step": 3, "x": 1.0}) + "\n"
    path.write_text(lines[0] + "garbage\n" + lines[2])
    with pytest.raises(ValueError, match=r"metrics\.jsonl:2: not valid JSON"):
        read_metrics(path)


BAD_STATUSES = ["", "{", "[]", '{"status": "running", "step": 3}', '{"status": "completed"}']


@pytest.mark.parametrize("content", BAD_STATUSES)
def test_a_bad_status_file_does_not_count_as_finished(tmp_path, content):
    (tmp_path / "final").mkdir()
    (tmp_path / "final" / "config.json").write_text("{}")
    (tmp_path / "status.json").write_text(content)
    with pytest.warns(UserWarning, match="the cell is not finished"):
        assert read_status(tmp_path) is None
    (tmp_path / "status.json").write_text('{"status": "completed", "step": 3, "reason": ""}')
    assert read_status(tmp_path) == {"status": "completed", "step": 3, "reason": ""}
    shutil.rmtree(tmp_path / "final")
    with pytest.warns(UserWarning, match="final/ holds no model"):
        assert read_status(tmp_path) is None


def test_a_held_lock_names_its_holder_and_a_dead_ones_is_taken_over(tmp_path):
    lock = tmp_path / "train.lock"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; sys.stdin.read()"], stdin=subprocess.PIPE)
    lock.write_text(json.dumps({"pid": holder.pid, "host": os.uname().nodename, "since": "earlier"}))
    with pytest.raises(FolderLocked, match=f"cell x: in use by pid {holder.pid} on this host since earlier"):
        with hold_lock(lock, "cell x"):
            pass
    holder.kill()
    holder.wait()
    with hold_lock(lock, "cell x"):  # its pid is gone: stale, taken over
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert not lock.exists()
    lock.write_text(json.dumps({"pid": 1, "host": "elsewhere", "since": "earlier"}))
    with pytest.raises(
        FolderLocked, match="host elsewhere \\(not checkable from here; delete .*train.lock once it is gone\\)"
    ):
        with hold_lock(lock, "cell x"):
            pass


# --- kill -9 of real processes at random points (slow: each restart imports torch again)

TRAIN_KILLS = 3
EVAL_KILLS = 1


def _train_process(cell_config, out):
    command = [sys.executable, "-m", "klrl", "train", "--config", str(cell_config), "--out", str(out)]
    with (out.parent / "train.log").open("ab") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)


@SLOW
def test_kill_9_at_random_points_of_train_and_a_second_trainer(cell_config, whole, tmp_path, capsys):
    """Each round: a trainer starts; a second one on the same cell is refused, naming the first;
    the first is killed with SIGKILL at a random metrics line plus a random delay (inside a step
    or a checkpoint write). Then a last run takes over the dead one's lock and
    finishes: the cell equals the uninterrupted one."""
    rng = random.Random(20)
    out = tmp_path / "train"
    for _ in range(TRAIN_KILLS):
        assert read_status(out) is None, "the cell finished before it could be killed again"
        process = _train_process(cell_config, out)
        wait_for(lambda: lock_holder(out / "train.lock") == process.pid, process)  # the dead one's lock taken over
        assert klrl(["train", "--config", str(cell_config), "--out", str(out)]) == 2
        assert f"in use by pid {process.pid} on this host" in capsys.readouterr().err
        target = rng.randint(line_count(out / "metrics.jsonl"), 6)  # the whole run writes 9 lines
        wait_for(lambda: line_count(out / "metrics.jsonl") >= target, process)
        time.sleep(rng.uniform(0.0, 0.05))  # a step takes about 0.1 s: anywhere inside one
        process.send_signal(signal.SIGKILL)
        assert process.wait() == -signal.SIGKILL, "the trainer ended before it could be killed"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert klrl(["train", "--config", str(cell_config), "--out", str(out)]) == 0
    assert_same_cell(out, whole)
    assert not (out / "train.lock").exists()


def _evaluation(model, data, out):
    return [
        "evaluate",
        "--model",
        str(model),
        "--tasks",
        "arith",
        "--data-dir",
        str(data),
        "--out",
        str(out),
        "--samples",
        "2",
        "--max-new-tokens",
        "6",
        "--threads",
        "1",
    ]


@SLOW
def test_kill_9_during_evaluate_then_a_rerun_equals_an_uninterrupted_one(whole, arith_data, tmp_path):
    model, data = whole / "final", arith_data.parent
    assert klrl(_evaluation(model, data, tmp_path / "whole" / "results.json")) == 0
    out = tmp_path / "cut" / "results.json"
    rng = random.Random(21)
    for _ in range(EVAL_KILLS):
        process = subprocess.Popen(
            [sys.executable, "-m", "klrl", *_evaluation(model, data, out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: lock_holder(out.with_name("results.json.lock")) == process.pid, process)
        time.sleep(rng.uniform(0.0, 1.0))  # importing lm-eval, loading the model or generating
        process.send_signal(signal.SIGKILL)
        assert process.wait() == -signal.SIGKILL, "the evaluation ended before it could be killed"
    assert klrl(_evaluation(model, data, out)) == 0
    ours, theirs = json.loads(out.read_text()), json.loads((tmp_path / "whole" / "results.json").read_text())
    assert ours["tasks"] == theirs["tasks"]
    assert (out.parent / "samples" / "arith.jsonl").read_text() == (
        tmp_path / "whole" / "samples" / "arith.jsonl"
    ).read_text()


# --- the numbers of docs/reliability.md


DEAD_LOCKS = 1
SECOND_WRITERS = TRAIN_KILLS  # one refused second trainer per round


def suite_counts() -> dict[str, int]:
    faults = (
        len(FILE_FAULTS)
        + CORRUPT_CHECKPOINTS
        + len(BAD_STATUSES)
        + DEAD_LOCKS
        + KILLED_GRADERS
        + TRAIN_KILLS
        + SECOND_WRITERS
        + EVAL_KILLS
    )
    faults += GRID_KILLS + ORPHANS_REFUSED
    hostile = (
        len(HOSTILE_ROWS)
        + EDITED_DATA
        + len(HOSTILE_COMPLETIONS)
        + len(DEADLINE_TOWERS)
        + len(USER_MISTAKES)
        + CRAFTED_FILES
    )
    return {"faults": faults, "hostile": hostile}


def test_the_reliability_page_states_the_suites_counts(repo_root):
    """docs/reliability.md holds what `python tests/fault_counts.py` writes (run it after changing the suite)."""
    from fault_counts import with_counts

    page = (repo_root / "docs" / "reliability.md").read_text()
    assert page == with_counts(page, suite_counts())
