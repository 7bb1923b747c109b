"""Fault injection: kills, torn and empty files, two writers, hostile data rows and completions.

Every case ends in one of two ways: the final weights and metrics (or evaluation results) equal
an uninterrupted run's, or a clear one-line refusal. The counts the README's "Reliability"
section states are computed from this file's lists (`suite_counts`) and checked against it.
"""

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings

import pytest
import torch
import yaml
from safetensors.torch import load_file

from klrl import verify_worker
from klrl.cli import main as klrl
from klrl.folder_lock import FolderLocked, hold_lock
from klrl.rewards import math_reward
from klrl.tasks.data import RowLimits, prepare, read_split
from klrl.training import trainer as trainer_module
from klrl.training.checkpoint import UnsafeCheckpoint, load_checkpoint, save_checkpoint
from klrl.training.tracking import MetricsLog, read_metrics, read_status

SLOW = pytest.mark.slow


class Crash(BaseException):
    """Stands for the process dying: nothing after it runs, the files stay as they are."""


def _settings(tiny_base, arith_data, **overrides) -> dict:
    return {
        "base_model": str(tiny_base), "train_data": str(arith_data / "train.jsonl"), "eval_data": str(arith_data / "test.jsonl"),
        "reward": "arithmetic", "steps": 8, "prompts_per_step": 4, "group_size": 4, "max_new_tokens": 6, "lr": 1e-2,
        "weight_decay": 0.0, "eval_every": 4, "eval_size": 4, "eval_samples": 1, "checkpoint_every": 2, "collapse_window": 0,
        "kl": "k3-loss", "beta": 0.1, "async_lag": 1, "threads": 1,
    } | overrides


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


def _strip_times(records):
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in records]


def assert_same_cell(folder, whole):
    """Final weights bit for bit, the metrics history, the status, and no checkpoint left."""
    ours, theirs = load_file(folder / "final" / "model.safetensors"), load_file(whole / "final" / "model.safetensors")
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[name], theirs[name]) for name in ours)
    assert _strip_times(read_metrics(folder / "metrics.jsonl")) == _strip_times(read_metrics(whole / "metrics.jsonl"))
    assert read_status(folder) == read_status(whole)
    assert not any(folder.glob("checkpoint*"))


# --- faults at known points of a training run (in process: the crash leaves files as a kill would)


def _after_checkpoint(step, damage):
    save = trainer_module.save_checkpoint

    def save_then_crash(folder, state):
        save(folder, state)
        if state["step"] == step:
            damage(folder)
            raise Crash

    return "save_checkpoint", save_then_crash


def _torn_checkpoint(folder):
    path = folder / "checkpoint.pt"
    os.truncate(path, path.stat().st_size // 2)


def _unrenamed_checkpoint(folder):  # killed between the two renames: only .prev and .tmp exist
    (folder / "checkpoint.pt").rename(folder / "checkpoint.pt.tmp")


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
    "checkpoint torn": _after_checkpoint(4, _torn_checkpoint),
    "checkpoint between renames": _after_checkpoint(4, _unrenamed_checkpoint),
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


def _state(step):
    return {"step": step, "policy": {"w": torch.full((2,), float(step))}, "optimizer": {}, "scheduler": {}, "history": []}


class _Payload:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_a_crafted_checkpoint_is_refused_without_running_it(tmp_path, monkeypatch, cell_config):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "train"
    out.mkdir()
    torch.save({"step": 3, "policy": _Payload()}, out / "checkpoint.pt")
    with pytest.raises(UnsafeCheckpoint, match=r"checkpoint\.pt: refused, it would run code on load \(GLOBAL posix.system\)"):
        load_checkpoint(out)
    assert klrl(["train", "--config", str(cell_config), "--out", str(out)]) == 2
    assert not (tmp_path / "PWNED").exists()
    torch.load(out / "checkpoint.pt", weights_only=False)  # the old way of loading it runs the payload
    assert (tmp_path / "PWNED").exists()


def test_a_corrupt_newest_checkpoint_is_skipped_for_the_previous_one(tmp_path):
    for step in (2, 4):
        save_checkpoint(tmp_path, _state(step))
    os.truncate(tmp_path / "checkpoint.pt", 40)
    with pytest.warns(UserWarning, match=r"checkpoint\.pt: unreadable .*; skipped"):
        assert load_checkpoint(tmp_path)["step"] == 2
    (tmp_path / "checkpoint.prev.pt").write_bytes(b"")
    with pytest.warns(UserWarning, match=r"checkpoint\.prev\.pt: unreadable"):
        assert load_checkpoint(tmp_path) is None  # nothing readable: start over (deterministically)
    torch.save({"step": 1}, tmp_path / "checkpoint.pt")
    with pytest.warns(UserWarning, match="not a klrl checkpoint \\(no 'policy'\\)"):
        load_checkpoint(tmp_path)


def test_a_checkpoint_round_trips_the_rng_states(tmp_path):
    random.seed(5)
    torch.manual_seed(5)
    save_checkpoint(tmp_path, _state(2))
    expected = (random.random(), torch.rand(3))
    random.seed(0)
    torch.manual_seed(0)
    state = load_checkpoint(tmp_path)
    assert torch.equal(state["policy"]["w"], torch.full((2,), 2.0))
    assert random.random() == expected[0] and torch.equal(torch.rand(3), expected[1])


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
    with pytest.raises(ValueError, match=r"metrics\.jsonl:2: not a metrics record"):
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
    with pytest.raises(FolderLocked, match="host elsewhere \\(not checkable from here; delete .*train.lock once it is gone\\)"):
        with hold_lock(lock, "cell x"):
            pass


# --- hostile data rows: each refused when read, naming file:line


def _row(**fields):
    return {"id": "r", "problem": "1+1", "prompt": "1+1", "answer": "2", "meta": {}} | fields


HOSTILE_ROWS = {
    "non-UTF-8 byte": (json.dumps(_row()).encode().replace(b"1+1", b"1\xff1", 1), "arithmetic", r":3: not UTF-8 \(byte 0xff at column \d+\)"),
    "10 MB prompt": (json.dumps(_row(prompt="7" * 10_000_000)).encode(), "arithmetic", r":3: prompt of 312500\+ tokens, over max_prompt_tokens=2048"),
    "prompt over the token limit": (json.dumps(_row(prompt="a b " * 1500)).encode(), "arithmetic", r":3: prompt of 3000\+ tokens"),
    "answer 'twelve' (arithmetic)": (json.dumps(_row(answer="twelve")).encode(), "arithmetic", r":3: answer 'twelve' is not an integer"),
    "answer not JSON (countdown)": (json.dumps(_row(answer="3 5 8 -> 64")).encode(), "countdown", r":3: answer '3 5 8 -> 64' is not JSON"),
    "countdown without numbers": (json.dumps(_row(answer='{"target": 6}')).encode(), "countdown", r":3: answer .* is not a JSON object"),
    "1 MB answer": (json.dumps(_row(answer="1" * 1_000_000)).encode(), "math", r":3: answer of 1000000 characters, over max_answer_chars=1000"),
    "empty math answer": (json.dumps(_row(answer=" ")).encode(), "math", r":3: answer ' ' is not a non-empty answer"),
}


@pytest.mark.parametrize("line, reward, message", HOSTILE_ROWS.values(), ids=HOSTILE_ROWS.keys())
def test_a_hostile_row_is_named_by_file_and_line(tmp_path, line, reward, message):
    good = json.dumps(_row(answer='{"numbers": [1, 1], "target": 2}' if reward == "countdown" else "2")).encode()
    path = tmp_path / "test.jsonl"
    path.write_bytes(good + b"\n" + good + b"\n" + line + b"\n")
    with pytest.raises(ValueError, match="test.jsonl" + message):
        read_split(path, reward, RowLimits(), count_tokens=lambda text: len(text.split()))


def test_data_edited_after_prepare_is_refused_by_train_and_evaluate(tiny_base, tmp_path):
    data = tmp_path / "data"
    prepare("arith", data / "arith", seed=0, sizes={"train": 8, "test": 4})
    test = data / "arith" / "test.jsonl"
    rows = test.read_text().splitlines()
    test.write_text("\n".join(rows[1:] + rows[:1]) + "\n")  # every row still valid, the order changed
    with pytest.raises(ValueError, match=r"test\.jsonl: changed since prepare-data \(sha256 [0-9a-f]{12}…, the manifest says"):
        read_split(test)
    config = tmp_path / "cell.yaml"
    config.write_text(yaml.safe_dump(_settings(tiny_base, data / "arith", steps=1, prompts_per_step=2)))
    assert klrl(["train", "--config", str(config), "--out", str(tmp_path / "train")]) == 2
    evaluate = ["evaluate", "--model", str(tiny_base), "--tasks", "arith", "--data-dir", str(data), "--out", str(tmp_path / "eval" / "results.json")]
    assert klrl(evaluate) == 2
    assert not (tmp_path / "eval" / "results.json").exists()


# --- hostile completions: bounded per item and per batch, cached by content

TOWER = r"\boxed{9^{9^{9^{%d}}}}"  # math-verify would compute it for hours
HOSTILE_COMPLETIONS = [TOWER % n for n in range(3, 9)] + [r"\boxed{(10^{10})!}", "\\boxed{" + "{" * 5000 + "1"]


def test_hostile_completions_score_zero_and_the_rest_are_graded(monkeypatch):
    monkeypatch.setattr(verify_worker, "WORKERS", 2)
    verify_worker.grading_counts()
    honest = [r"\boxed{2\sqrt{2}}", r"\boxed{\sqrt{27}}"]
    rewards = math_reward(HOSTILE_COMPLETIONS + honest, ["81"] * len(HOSTILE_COMPLETIONS) + [r"\sqrt{8}", r"3\sqrt{3}"], timeout=0.5)
    assert rewards == [0.0] * len(HOSTILE_COMPLETIONS) + [1.0, 1.0]
    first = verify_worker.grading_counts()
    assert first["grading/timeouts"] >= 6 and first["grading/deadline_zeroed"] == 0
    again = math_reward(HOSTILE_COMPLETIONS, ["81"] * len(HOSTILE_COMPLETIONS), timeout=0.5)
    assert again == [0.0] * len(HOSTILE_COMPLETIONS)
    second = verify_worker.grading_counts()
    assert second["grading/timeouts"] == 0  # a timed-out answer is not tried twice
    assert second["grading/cache_hits"] >= first["grading/timeouts"]


DEADLINE_TOWERS = [TOWER % n for n in range(100, 110)]


def test_a_batch_past_its_deadline_scores_the_rest_zero_and_counts_them(monkeypatch):
    monkeypatch.setattr(verify_worker, "WORKERS", 2)
    verify_worker.grading_counts()
    rewards = math_reward(DEADLINE_TOWERS + [r"\boxed{\sqrt{12}}"], ["81"] * 10 + [r"2\sqrt{3}"], timeout=0.5, deadline=1.2)
    counts = verify_worker.grading_counts()
    assert rewards == [0.0] * 11  # the honest last item was not reached either: zeroed, and counted
    assert counts["grading/timeouts"] + counts["grading/deadline_zeroed"] == 11
    assert counts["grading/deadline_zeroed"] >= 5  # at most 2 workers × 3 items started in 1.2 s
    assert math_reward([r"\boxed{\sqrt{12}}"], [r"2\sqrt{3}"], timeout=5.0) == [1.0]  # not cached as 0: graded next time


# --- user mistakes: one line each, the traceback only with --debug

USER_MISTAKES = {
    "missing config file": (["train", "--config", "nowhere.yaml", "--out", "x"], "klrl train: error: [Errno 2] No such file or directory: 'nowhere.yaml'"),
    "YAML syntax error": (["train", "--config", "bad.yaml", "--out", "x"], "klrl train: error: bad.yaml:3:1: not valid YAML"),
    "unknown train key": (["train", "--config", "typo.yaml", "--out", "x"], "klrl train: error: train config: unknown key 'bta'"),
    "unknown KL name": (["describe", "k4-reward"], "klrl describe: error: unknown KL configuration 'k4-reward'"),
    "bogus tracking URI": (["track-grid", "--experiment", "e", "--uri", "sqlte:/x.db", "--out", "r.json"], "klrl track-grid: error: tracking.uri 'sqlte:/x.db'"),
}


@pytest.mark.parametrize("args, message", USER_MISTAKES.values(), ids=USER_MISTAKES.keys())
def test_a_user_mistake_is_one_line(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text("base_model: x\nsteps: [1,\n")
    (tmp_path / "typo.yaml").write_text("base_model: x\ntrain_data: y\neval_data: z\nreward: arithmetic\nbta: 0.1\n")
    assert klrl(args) == 2
    stderr = capsys.readouterr().err
    assert stderr.startswith(message) and stderr.endswith("(--debug for the traceback)\n") and stderr.count("\n") == 1, stderr
    with pytest.raises((ValueError, OSError)):  # --debug: the exception itself, with its traceback
        klrl([*args, "--debug"])


# --- kill -9 of real processes at random points (slow: each restart imports torch again)

TRAIN_KILLS = 3
EVAL_KILLS = 1


def _train_process(cell_config, out):
    command = [sys.executable, "-m", "klrl", "train", "--config", str(cell_config), "--out", str(out)]
    with (out.parent / "train.log").open("ab") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)


def _wait_for(condition, process, seconds=300.0):
    deadline = time.monotonic() + seconds
    while not condition() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)


def _lock_holder(path):
    try:
        return json.loads(path.read_text())["pid"]
    except (OSError, ValueError):
        return None


def _lines(path):
    return path.read_bytes().count(b"\n") if path.exists() else 0


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
        _wait_for(lambda: _lock_holder(out / "train.lock") == process.pid, process)  # the dead one's lock taken over
        assert klrl(["train", "--config", str(cell_config), "--out", str(out)]) == 2
        assert f"in use by pid {process.pid} on this host" in capsys.readouterr().err
        target = rng.randint(_lines(out / "metrics.jsonl"), 6)  # the whole run writes 9 lines
        _wait_for(lambda: _lines(out / "metrics.jsonl") >= target, process)
        time.sleep(rng.uniform(0.0, 0.05))  # a step takes about 0.1 s: anywhere inside one
        process.send_signal(signal.SIGKILL)
        assert process.wait() == -signal.SIGKILL, "the trainer ended before it could be killed"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert klrl(["train", "--config", str(cell_config), "--out", str(out)]) == 0
    assert_same_cell(out, whole)
    assert not (out / "train.lock").exists()


def _evaluation(model, data, out):
    return ["evaluate", "--model", str(model), "--tasks", "arith", "--data-dir", str(data), "--out", str(out),
            "--samples", "2", "--max-new-tokens", "6", "--threads", "1"]


@SLOW
def test_kill_9_during_evaluate_then_a_rerun_equals_an_uninterrupted_one(whole, arith_data, tmp_path):
    model, data = whole / "final", arith_data.parent
    assert klrl(_evaluation(model, data, tmp_path / "whole" / "results.json")) == 0
    out = tmp_path / "cut" / "results.json"
    rng = random.Random(21)
    for _ in range(EVAL_KILLS):
        process = subprocess.Popen([sys.executable, "-m", "klrl", *_evaluation(model, data, out)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for(lambda: _lock_holder(out.with_name("results.json.lock")) == process.pid, process)
        time.sleep(rng.uniform(0.0, 1.0))  # importing lm-eval, loading the model or generating
        process.send_signal(signal.SIGKILL)
        assert process.wait() == -signal.SIGKILL, "the evaluation ended before it could be killed"
    assert klrl(_evaluation(model, data, out)) == 0
    ours, theirs = json.loads(out.read_text()), json.loads((tmp_path / "whole" / "results.json").read_text())
    assert ours["tasks"] == theirs["tasks"]
    assert (out.parent / "samples" / "arith.jsonl").read_text() == (tmp_path / "whole" / "samples" / "arith.jsonl").read_text()


# --- the README's numbers


CORRUPT_CHECKPOINTS = 3  # a truncated newest, an empty previous, one without its keys
DEAD_LOCKS = 1
SECOND_WRITERS = TRAIN_KILLS  # one refused second trainer per round
CRAFTED_FILES = 1  # the checkpoint with a code-running pickle
EDITED_DATA = 1


def suite_counts() -> dict[str, int]:
    faults = len(FILE_FAULTS) + CORRUPT_CHECKPOINTS + len(BAD_STATUSES) + DEAD_LOCKS + TRAIN_KILLS + SECOND_WRITERS + EVAL_KILLS
    hostile = len(HOSTILE_ROWS) + EDITED_DATA + len(HOSTILE_COMPLETIONS) + len(DEADLINE_TOWERS) + len(USER_MISTAKES) + CRAFTED_FILES
    return {"faults": faults, "hostile": hostile}


def test_the_readme_states_the_suites_counts(repo_root):
    counts = suite_counts()
    readme = (repo_root / "README.md").read_text()
    stated = re.search(r"injects (\d+) faults and (\d+) hostile inputs", readme)
    assert stated and (int(stated.group(1)), int(stated.group(2))) == (counts["faults"], counts["hostile"])
