"""klrl.tasks.countdown: seeded, disjoint splits, solvable rows, the boxed-expression prompt."""

from __future__ import annotations

import ast
import json
from fractions import Fraction

import pytest

from klrl.tasks import countdown


def evaluate(expression: str) -> tuple[Fraction, list[int]]:
    """The exact value of an arithmetic expression and its integer literals, by a whitelisted AST walk."""
    literals = []
    operators = {
        ast.Add: Fraction.__add__,
        ast.Sub: Fraction.__sub__,
        ast.Mult: Fraction.__mul__,
        ast.Div: Fraction.__truediv__,
    }

    def walk(node):
        if isinstance(node, ast.BinOp) and type(node.op) in operators:
            return operators[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            literals.append(node.value)
            return Fraction(node.value)
        raise AssertionError(f"{ast.dump(node)} is not allowed in {expression!r}")

    return walk(ast.parse(expression, mode="eval").body), literals


@pytest.fixture(scope="module")
def countdown_rows():
    return {
        "train": countdown.load_countdown(6, 0, "train"),
        "test": countdown.load_countdown(6, 0, "test"),
        "again": countdown.load_countdown(6, 0, "train"),
        "seed1": countdown.load_countdown(6, 1, "train"),
    }


def test_countdown_is_seeded_and_deterministic(countdown_rows):
    assert countdown_rows["train"] == countdown_rows["again"]
    assert len(countdown_rows["train"]) == 6
    answers = {row["answer"] for row in countdown_rows["train"]}
    assert answers.isdisjoint(row["answer"] for row in countdown_rows["seed1"])
    json.dumps(countdown_rows)


def test_countdown_splits_are_disjoint(countdown_rows):
    train, test = countdown_rows["train"], countdown_rows["test"]
    assert len(test) == 6
    assert {countdown.problem_key(row) for row in train}.isdisjoint(countdown.problem_key(row) for row in test)
    assert {row["meta"]["config"]["seed"] for row in train} == {countdown.split_seed(0, "train")}
    assert {row["meta"]["config"]["seed"] for row in test} == {countdown.split_seed(0, "test")}


def test_countdown_rows_have_a_solution(countdown_rows):
    for row in countdown_rows["train"] + countdown_rows["test"] + countdown_rows["seed1"]:
        answer = json.loads(row["answer"])
        assert list(answer) == ["numbers", "target"]
        value, literals = evaluate(row["meta"]["solution"])
        assert value == answer["target"]
        assert sorted(literals) == sorted(answer["numbers"])
        assert 4 <= len(answer["numbers"]) <= 6 and 100 <= answer["target"] <= 999


def test_countdown_problem_asks_for_a_boxed_expression(countdown_rows):
    for row in countdown_rows["train"]:
        answer = json.loads(row["answer"])
        question = row["problem"].removesuffix(countdown.INSTRUCTIONS)
        assert question != row["problem"] and "5. Put the final expression inside \\boxed{}" in row["problem"]
        assert ", ".join(map(str, answer["numbers"])) in question and str(answer["target"]) in question
        assert "Do not include any other text" not in row["problem"] and "<answer>" not in row["problem"]


def test_countdown_drops_test_rows_seen_in_train(monkeypatch):
    # With the test seed 2 above the train one, test entries 0-1 are train entries 2-3.
    monkeypatch.setattr(countdown, "split_seed", lambda seed, split: 10 if split == "train" else 12)
    test = countdown.load_countdown(4, 0, "test")
    assert [row["meta"]["source_index"] for row in test] == [2, 3]


def test_countdown_bad_arguments():
    with pytest.raises(ValueError, match="split"):
        countdown.load_countdown(2, 0, "dev")
    with pytest.raises(ValueError, match="seed"):
        countdown.load_countdown(2, "0", "train")
    with pytest.raises(ValueError, match="size"):
        countdown.load_countdown(0, 0, "train")
