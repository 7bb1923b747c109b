"""klrl.tasks.data: prepared data on disk (splits, manifest, shots), its checks, the prepare-data verb."""

import json
import subprocess
import sys

import pytest

from klrl.core.files import sha256_file
from klrl.grading.rewards import get_reward
from klrl.tasks import MATH_INSTRUCTION
from klrl.tasks.data import prepare, read_split


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
    command = [
        sys.executable,
        "-m",
        "klrl",
        "prepare-data",
        "--task",
        "arith",
        "--out",
        str(tmp_path / "cli"),
        "--train-size",
        "2",
        "--test-size",
        "2",
    ]
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
        (
            '{"id": "x", "problem": "p", "prompt": "p", "answer": "2", "meta": {}, "shots": [{"user": "q"}]}',
            "bad.jsonl:2: field 'shots': must be a list of",
        ),
    ],
)
def test_a_malformed_row_is_named_by_file_and_line(tmp_path, line, message):
    good = {"id": "a", "problem": "1+1", "prompt": "1+1", "answer": "2", "meta": {}}
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(good) + "\n" + line + "\n")
    with pytest.raises(ValueError, match=message):
        read_split(path)


@pytest.mark.slow
def test_prepare_data_command(tmp_path):
    out = tmp_path / "countdown"
    cmd = [sys.executable, "-m", "klrl", "prepare-data", "--task", "countdown", "--out", str(out)]
    result = subprocess.run(
        [*cmd, "--train-size", "6", "--test-size", "4", "--seed", "1"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "train.jsonl: 6, test.jsonl: 4" in result.stdout
    rows = read_split(out / "train.jsonl")
    assert (
        get_reward("countdown")([f"\\boxed{{{r['meta']['solution']}}}" for r in rows], [r["answer"] for r in rows])
        == [1.0] * 6
    )
