"""Hostile inputs: data rows, completions and command lines, each refused or bounded.

A bad data row is refused when read, naming `file:line`; a hostile completion scores 0 within
its per-item and per-batch bounds; a user's mistake is one line. tests/test_faults.py counts
these lists for docs/reliability.md's fault suite.
"""

import json

import pytest
import yaml

from klrl.grading import verify_worker
from klrl.cli import main as klrl
from klrl.grading.rewards import math_reward
from klrl.tasks.data import RowLimits, prepare, read_split

from conftest import tiny_settings

EDITED_DATA = 2  # the file changed after prepare-data; a 10 MB row appended to a prepared split


# --- hostile data rows: each refused when read, naming file:line


def _row(**fields):
    return {"id": "r", "problem": "1+1", "prompt": "1+1", "answer": "2", "meta": {}} | fields


HOSTILE_ROWS = {
    "non-UTF-8 byte": (
        json.dumps(_row()).encode().replace(b"1+1", b"1\xff1", 1),
        "arithmetic",
        r":3: not UTF-8 \(byte 0xff at column \d+\)",
    ),
    "10 MB prompt": (
        json.dumps(_row(prompt="7" * 10_000_000)).encode(),
        "arithmetic",
        r":3: prompt of 312500\+ tokens, over max_prompt_tokens=2048",
    ),
    "prompt over the token limit": (
        json.dumps(_row(prompt="a b " * 1500)).encode(),
        "arithmetic",
        r":3: prompt of 3000\+ tokens",
    ),
    "answer 'twelve' (arithmetic)": (
        json.dumps(_row(answer="twelve")).encode(),
        "arithmetic",
        r":3: answer 'twelve' is not an integer",
    ),
    "answer not JSON (countdown)": (
        json.dumps(_row(answer="3 5 8 -> 64")).encode(),
        "countdown",
        r":3: answer '3 5 8 -> 64' is not JSON",
    ),
    "countdown without numbers": (
        json.dumps(_row(answer='{"target": 6}')).encode(),
        "countdown",
        r":3: answer .* is not a JSON object",
    ),
    "1 MB answer": (
        json.dumps(_row(answer="1" * 1_000_000)).encode(),
        "math",
        r":3: answer of 1000000 characters, over max_answer_chars=1000",
    ),
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
    with pytest.raises(
        ValueError, match=r"test\.jsonl: changed since prepare-data \(sha256 [0-9a-f]{12}…, the manifest says"
    ):
        read_split(test)
    config = tmp_path / "cell.yaml"
    settings = tiny_settings(tiny_base, data / "arith", steps=1, prompts_per_step=2, group_size=2)
    config.write_text(yaml.safe_dump(settings))
    assert klrl(["train", "--config", str(config), "--out", str(tmp_path / "train")]) == 2
    evaluate = [
        "evaluate",
        "--model",
        str(tiny_base),
        "--tasks",
        "arith",
        "--data-dir",
        str(data),
        "--out",
        str(tmp_path / "eval" / "results.json"),
    ]
    assert klrl(evaluate) == 2
    assert not (tmp_path / "eval" / "results.json").exists()


# --- hostile completions: bounded per item and per batch, cached by content

TOWER = r"\boxed{9^{9^{9^{%d}}}}"  # math-verify would compute it for hours
HOSTILE_COMPLETIONS = [TOWER % n for n in range(3, 9)] + [r"\boxed{(10^{10})!}", "\\boxed{" + "{" * 5000 + "1"]


def test_hostile_completions_score_zero_and_the_rest_are_graded(monkeypatch):
    monkeypatch.setattr(verify_worker, "WORKERS", 2)
    verify_worker.grading_counts()
    honest = [r"\boxed{2\sqrt{2}}", r"\boxed{\sqrt{27}}"]
    rewards = math_reward(
        HOSTILE_COMPLETIONS + honest, ["81"] * len(HOSTILE_COMPLETIONS) + [r"\sqrt{8}", r"3\sqrt{3}"], timeout=0.5
    )
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
    rewards = math_reward(
        DEADLINE_TOWERS + [r"\boxed{\sqrt{75}}"], ["81"] * 10 + [r"5\sqrt{3}"], timeout=0.5, deadline=1.2
    )
    counts = verify_worker.grading_counts()
    assert rewards == [0.0] * 11  # the honest last item was not reached either: zeroed, and counted
    assert counts["grading/timeouts"] + counts["grading/deadline_zeroed"] == 11
    assert counts["grading/deadline_zeroed"] >= 5  # at most 2 workers × 3 items started in 1.2 s
    assert math_reward([r"\boxed{\sqrt{75}}"], [r"5\sqrt{3}"], timeout=5.0) == [
        1.0
    ]  # not cached as 0: graded next time


# --- user mistakes: one line each, the traceback only with --debug

USER_MISTAKES = {
    "missing config file": (
        ["train", "--config", "nowhere.yaml", "--out", "x"],
        "klrl train: error: [Errno 2] No such file or directory: 'nowhere.yaml'",
    ),
    "YAML syntax error": (
        ["train", "--config", "bad.yaml", "--out", "x"],
        "klrl train: error: bad.yaml:3:1: not valid YAML",
    ),
    "YAML syntax error in a workflow config": (
        ["cells", "--config", "bad.yaml"],
        "klrl cells: error: bad.yaml:3:1: not valid YAML",
    ),
    "unknown train key": (
        ["train", "--config", "typo.yaml", "--out", "x"],
        "klrl train: error: train config: unknown key 'bta'",
    ),
    "unknown KL name": (["describe", "k4-reward"], "klrl describe: error: unknown KL configuration 'k4-reward'"),
    "bogus tracking URI": (
        ["track-grid", "--experiment", "e", "--uri", "sqlte:/x.db", "--out", "r.json"],
        "klrl track-grid: error: tracking.uri 'sqlte:/x.db'",
    ),
}


@pytest.mark.parametrize("args, message", USER_MISTAKES.values(), ids=USER_MISTAKES.keys())
def test_a_user_mistake_is_one_line(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text("base_model: x\nsteps: [1,\n")
    (tmp_path / "typo.yaml").write_text("base_model: x\ntrain_data: y\neval_data: z\nreward: arithmetic\nbta: 0.1\n")
    assert klrl(args) == 2
    stderr = capsys.readouterr().err
    assert (
        stderr.startswith(message) and stderr.endswith("(--debug for the traceback)\n") and stderr.count("\n") == 1
    ), stderr
    with pytest.raises((ValueError, OSError)):  # --debug: the exception itself, with its traceback
        klrl([*args, "--debug"])


def test_a_10_mb_prompt_stops_train_before_any_step_naming_its_row(tiny_base, tmp_path, capsys):
    data = tmp_path / "arith"
    prepare("arith", data, seed=0, sizes={"train": 8, "test": 4})
    with (data / "train.jsonl").open("a") as handle:
        handle.write(json.dumps(_row(prompt="7+" * 5_000_000)) + "\n")
    settings = tiny_settings(tiny_base, data, steps=1, prompts_per_step=2, group_size=2)
    (tmp_path / "cell.yaml").write_text(yaml.safe_dump(settings))
    assert klrl(["train", "--config", str(tmp_path / "cell.yaml"), "--out", str(tmp_path / "train")]) == 2
    assert "train.jsonl:9: prompt of 312500+ tokens, over max_prompt_tokens=2048" in capsys.readouterr().err
    assert not (tmp_path / "train" / "metrics.jsonl").exists()
