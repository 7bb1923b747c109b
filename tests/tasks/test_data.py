"""klrl.tasks: the embedded arithmetic family, the task registry, prepared data on disk."""

import json
import random
import subprocess
import sys

import pytest

from klrl.files import sha256_file
from klrl.rewards import get_reward
from klrl.tasks import MATH_INSTRUCTION, TASKS, get_task, load_rows
from klrl.tasks.arith import corrupt, generate, is_test_problem, pretraining_example, space_size
from klrl.tasks.data import prepare, read_split


@pytest.mark.parametrize("task", ["arith", "arith-long", "arith-word", "arith-spoken", "arith-long-spoken"])
def test_arith_rows_are_correct_distinct_and_deterministic(task):
    rows = generate(task, "train", 300, seed=3)
    assert rows == generate(task, "train", 300, seed=3)
    assert rows != generate(task, "train", 300, seed=4)
    keys = {(r["meta"]["a"], r["meta"]["op"], r["meta"]["b"]) for r in rows}
    assert len(keys) == 300
    low, high = (100, 999) if task.startswith("arith-long") else (0, 99)
    for row in rows:
        a, op, b = row["meta"]["a"], row["meta"]["op"], row["meta"]["b"]
        assert low <= a <= high and 0 <= b <= 9
        assert int(row["answer"]) == (a + b if op == "+" else a - b) >= 0
        assert str(a) in row["problem"] and str(b) in row["problem"]
    reward = get_reward("arithmetic")
    assert reward([f"\\boxed{{{r['answer']}}}" for r in rows], [r["answer"] for r in rows]) == [1.0] * 300


def test_word_problems_say_the_operation_in_words():
    for row in generate("arith-word", "test", 50, seed=0):
        assert "+" not in row["problem"] and "-" not in row["problem"]
        assert row["problem"].endswith("?")


def test_spoken_problems_are_the_symbolic_ones_asked_in_words():
    for symbolic, spoken in (("arith", "arith-spoken"), ("arith-long", "arith-long-spoken")):
        rows, asked = generate(symbolic, "test", 40, seed=2), generate(spoken, "test", 40, seed=2)
        assert [(r["meta"], r["answer"]) for r in rows] == [(r["meta"], r["answer"]) for r in asked]
        for row in asked:
            a, op, b = row["meta"]["a"], row["meta"]["op"], row["meta"]["b"]
            assert row["problem"] == f"What is {a} {'plus' if op == '+' else 'minus'} {b}?"


def test_test_split_is_held_out_from_train_and_pretraining():
    test = {(r["meta"]["a"], r["meta"]["op"], r["meta"]["b"]) for r in generate("arith", "test", 250, seed=0)}
    train = {(r["meta"]["a"], r["meta"]["op"], r["meta"]["b"]) for r in generate("arith", "train", 1600, seed=0)}
    assert test and not test & train
    assert all(is_test_problem(*key) for key in test)
    rng = random.Random(0)
    for _ in range(3000):
        problem, _ = pretraining_example("arith", rng, 0.5)
        op = "+" if "+" in problem else "-"
        a, b = problem.split(op)
        assert not is_test_problem(int(a), op, int(b))


def test_sizes_are_bounded_by_the_problem_space():
    assert space_size("arith", "train") + space_size("arith", "test") == 100 * 10 + 955  # a + b, and a − b with a ≥ b
    assert len(generate("arith", "test", space_size("arith", "test"), seed=0)) == space_size("arith", "test")
    with pytest.raises(ValueError, match="size: 5000 exceeds the 1673 distinct arith train problems"):
        generate("arith", "train", 5000, seed=0)


def test_corruption_changes_exactly_one_digit():
    rng = random.Random(1)
    for answer in [0, 7, 10, 58, 100, 1998]:
        for _ in range(50):
            wrong = corrupt(answer, rng)
            before, after = str(answer), str(wrong)
            assert wrong != answer and len(before) == len(after)
            assert sum(x != y for x, y in zip(before, after)) == 1


def test_pretraining_corruption_rate():
    rng = random.Random(2)
    pairs = [pretraining_example("arith", rng, 0.6) for _ in range(4000)]
    def value(problem):
        op = "+" if "+" in problem else "-"
        a, b = map(int, problem.split(op))
        return a + b if op == "+" else a - b

    wrong = sum(value(p) != int(a) for p, a in pairs)
    assert wrong / len(pairs) == pytest.approx(0.6, abs=0.03)


def test_registry_errors_name_the_problem():
    with pytest.raises(ValueError, match="unknown task 'gsm8k'; known tasks: arith, arith-long"):
        get_task("gsm8k")
    with pytest.raises(ValueError, match="task 'mmlu-college-physics' has no split 'train'; its splits: test"):
        load_rows(TASKS["mmlu-college-physics"], "train", source="fixture")
    with pytest.raises(ValueError, match="source: 'hub' is not one of generated for task 'arith'"):
        load_rows(TASKS["arith"], "train", size=3, source="hub")
    with pytest.raises(ValueError, match="task 'arith' is generated: give the number of rows"):
        load_rows(TASKS["arith"], "train")


def test_every_task_names_a_known_reward():
    for task in TASKS.values():
        get_reward(task.reward)


def test_prepare_writes_splits_and_a_manifest_that_matches_them(tmp_path):
    manifest = prepare("arith-long", tmp_path / "a", seed=5, sizes={"train": 40, "test": 10})
    again = prepare("arith-long", tmp_path / "b", seed=5, sizes={"train": 40, "test": 10})
    assert manifest["files"] == again["files"]
    assert manifest["seed"] == 5 and manifest["task"] == "arith-long" and manifest["reward"] == "arithmetic"
    for name, info in manifest["files"].items():
        path = tmp_path / "a" / name
        assert info["sha256"] == sha256_file(path)
        assert info["count"] == len(read_split(path)) == {"train": 40, "test": 10}[info["split"]]
    assert json.loads((tmp_path / "a" / "manifest.json").read_text()) == manifest
    row = read_split(tmp_path / "a" / "test.jsonl")[0]
    assert row["prompt"] == row["problem"]


def test_prepare_math_fixture_uses_the_paper_prompt(tmp_path):
    manifest = prepare("math", tmp_path, source="fixture")
    assert manifest["source"] == "fixture"
    rows = read_split(tmp_path / "test.jsonl")
    assert all(row["prompt"] == row["problem"] + MATH_INSTRUCTION for row in rows)
    custom = prepare("arith", tmp_path / "c", sizes={"train": 2, "test": 2}, instruction=" Box it.")
    assert custom["instruction"] == " Box it."
    assert read_split(tmp_path / "c" / "train.jsonl")[0]["prompt"].endswith(" Box it.")


def test_shots_go_into_every_row_and_the_manifest(tmp_path):
    shots = [{"user": "What is 1 plus 1?", "assistant": "\\boxed{2}"}]
    manifest = prepare("arith-spoken", tmp_path / "s", sizes={"train": 3, "test": 2}, shots=shots)
    assert manifest["shots"] == shots and json.loads((tmp_path / "s" / "manifest.json").read_text())["shots"] == shots
    assert [row["shots"] for row in read_split(tmp_path / "s" / "train.jsonl")] == [shots] * 3
    assert prepare("arith", tmp_path / "z", sizes={"train": 2, "test": 2})["shots"] == []
    assert "shots" not in read_split(tmp_path / "z" / "train.jsonl")[0]
    with pytest.raises(ValueError, match="shots: must be a list of"):
        prepare("arith", tmp_path / "bad", sizes={"train": 2, "test": 2}, shots=[{"user": "q", "assistant": 2}])
    command = [sys.executable, "-m", "klrl", "prepare-data", "--task", "arith", "--out", str(tmp_path / "cli"), "--train-size", "2", "--test-size", "2"]
    refused = subprocess.run([*command, "--shots", "[{not json"], capture_output=True, text=True)
    assert refused.returncode == 2 and "argument --shots: not JSON" in refused.stderr
    assert not (tmp_path / "cli").exists()


def test_prepare_rejects_sizes_for_a_split_the_task_lacks(tmp_path):
    with pytest.raises(ValueError, match="has no split \\['train'\\]"):
        prepare("mmlu-college-biology", tmp_path, sizes={"train": 3}, source="fixture")


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "bad.jsonl:2: not valid JSON"),
        ("[1, 2]", "bad.jsonl:2: a row must be a JSON object"),
        ('{"id": "x", "problem": "p", "prompt": "p", "meta": {}}', "bad.jsonl:2: field 'answer' must be a str"),
        ('{"id": "x", "problem": "p", "prompt": "p", "answer": 3, "meta": {}}', "field 'answer' must be a str, got 3"),
        ('{"id": "x", "problem": "p", "prompt": "p", "answer": "2", "meta": {}, "shots": [{"user": "q"}]}', "bad.jsonl:2: field 'shots': must be a list of"),
    ],
)
def test_a_malformed_row_is_named_by_file_and_line(tmp_path, line, message):
    good = {"id": "a", "problem": "1+1", "prompt": "1+1", "answer": "2", "meta": {}}
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(good) + "\n" + line + "\n")
    with pytest.raises(ValueError, match=message):
        read_split(path)


def test_prepare_data_command(tmp_path):
    out = tmp_path / "countdown"
    cmd = [sys.executable, "-m", "klrl", "prepare-data", "--task", "countdown", "--out", str(out)]
    result = subprocess.run([*cmd, "--train-size", "6", "--test-size", "4", "--seed", "1"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "train.jsonl: 6, test.jsonl: 4" in result.stdout
    rows = read_split(out / "train.jsonl")
    assert get_reward("countdown")([f"\\boxed{{{r['meta']['solution']}}}" for r in rows], [r["answer"] for r in rows]) == [1.0] * 6
