"""The paper's task loaders: MATH / MATH-500, MMLU college science, Countdown.

Offline only: the Hub branches are exercised by a fake `datasets` module that serves the raw
fixture rows in the Hub's format, and sockets are blocked for every test here.
"""

from __future__ import annotations

import ast
import json
import socket
import sys
import types
from collections import Counter
from fractions import Fraction

import pytest

from klrl.tasks import countdown, math as math_task, mmlu

from conftest import records


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a task loader touched the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def fake_datasets(monkeypatch, tables: dict) -> list:
    """Install a `datasets` module whose load_dataset serves tables[(name, config, split)]; returns its call log."""
    calls = []

    def load_dataset(name, config=None, split=None):
        calls.append((name, config, split))
        return tables[(name, config, split)]

    module = types.ModuleType("datasets")
    module.load_dataset = load_dataset
    monkeypatch.setitem(sys.modules, "datasets", module)
    return calls


def config_of(math_type: str) -> str:
    return math_type.lower().replace(" & ", "_and_").replace(" ", "_")


# ---------------------------------------------------------------- MATH


def test_math_fixture_counts_and_coverage():
    train, test = math_task.load_math("train", "fixture"), math_task.load_math("test", "fixture")
    assert (len(train), len(test)) == (28, 8)
    assert not {row["id"] for row in train} & {row["id"] for row in test}
    subjects = Counter(row["meta"]["subject"] for row in train + test)
    assert len(subjects) == 7 and min(subjects.values()) >= 5 and sum(subjects.values()) == 36
    assert {row["meta"]["subject"] for row in test} == set(subjects)
    for subject in subjects:
        levels = {row["meta"]["level"] for row in train + test if row["meta"]["subject"] == subject}
        assert levels == {1, 2, 3, 4, 5}
    assert {config_of(subject) for subject in subjects} == set(math_task.SUBJECTS)
    assert math_task.load_math("train", "fixture") == train
    json.dumps(train + test)


def test_math_fixture_answers_are_the_last_boxed_content():
    raws = records(math_task.FIXTURE)
    rows = math_task.load_math("train", "fixture") + math_task.load_math("test", "fixture")
    by_line = {int(row["id"].rsplit("/", 1)[1]): row for row in rows}
    assert sorted(by_line) == list(range(1, len(raws) + 1))
    for number, raw in enumerate(raws, start=1):
        row = by_line[number]
        assert row["problem"] == raw["problem"]
        assert row["answer"] and row["answer"] == math_task.solution_answer(raw["solution"])
        assert raw["solution"].count("\\boxed") == 1 and "\\boxed{" + row["answer"] + "}" in raw["solution"]
    forms = {row["answer"] for row in rows}
    assert {"686", "-15", "\\frac{65}{8}", "9\\sqrt{3}", "36\\pi", "(2, 3)", "2x^2 + x - 15"} <= forms


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"$\boxed{\frac{\sqrt{3}}{2}}$", r"\frac{\sqrt{3}}{2}"),
        (r"first \boxed{1}, finally \boxed{ 2 }.", "2"),
        (r"$\boxed{\{1, 2\}}$ and $\boxed{\left\{ x \right.}$", r"\left\{ x \right."),
        (r"so the answer is $\boxed 7$.", "7"),
        (r"$\boxed{1}$, or in the old form $\boxed 2$", "2"),
        (r"$\boxed {3}$", "3"),
        (r"\fbox{12}", "12"),
        (r"unclosed \boxed{3", None),
        ("no answer here", None),
    ],
)
def test_solution_answer(text, expected):
    assert math_task.solution_answer(text) == expected


def test_convert_math500_row_exactly():
    raw = {
        "problem": "What is $1+1$?",
        "solution": "Adding, $1+1=\\boxed{2}$.",
        "answer": "2",
        "subject": "Prealgebra",
        "level": 1,
        "unique_id": "test/prealgebra/1.json",
    }
    assert math_task.convert(raw, raw["unique_id"], math_task.TEST_HUB) == {
        "id": "test/prealgebra/1.json",
        "problem": "What is $1+1$?",
        "answer": "2",
        "meta": {"subject": "Prealgebra", "level": 1, "source": "HuggingFaceH4/MATH-500"},
    }


def test_convert_hendrycks_row_exactly():
    raw = {
        "problem": "Compute $\\frac{1}{2}+\\frac{1}{3}$.",
        "level": "Level 2",
        "type": "Prealgebra",
        "solution": "We get $\\frac{3}{6}+\\frac{2}{6}=\\boxed{\\frac{5}{6}}$.",
    }
    assert math_task.convert(raw, "math/train/prealgebra/0", "src") == {
        "id": "math/train/prealgebra/0",
        "problem": "Compute $\\frac{1}{2}+\\frac{1}{3}$.",
        "answer": "\\frac{5}{6}",
        "meta": {"subject": "Prealgebra", "level": 2, "source": "src"},
    }
    assert math_task.convert({**raw, "level": "Level ?"}, "x", "src")["meta"]["level"] is None


GOOD = {"problem": "p", "level": "Level 1", "type": "Algebra", "solution": "$\\boxed{1}$"}


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({k: v for k, v in GOOD.items() if k != "solution"}, "'solution' is missing"),
        ({**GOOD, "solution": "the answer is 1"}, "no non-empty"),
        ({**GOOD, "solution": "$\\boxed{}$"}, "no non-empty"),
        ({**GOOD, "problem": 3}, "'problem'"),
        ({**GOOD, "level": "hard"}, "level 'hard'"),
        ({**GOOD, "type": None}, "'type'"),
        ({"problem": "p", "solution": "s", "answer": "", "subject": "Algebra", "level": 1}, "'answer'"),
        (["not", "a", "dict"], "not a dict"),
    ],
)
def test_malformed_math_rows_raise_naming_the_row(raw, problem):
    with pytest.raises(ValueError, match="my-source row math/train/algebra/7: ") as error:
        math_task.convert(raw, "math/train/algebra/7", "my-source")
    assert problem in str(error.value)


def test_math_bad_split_or_source():
    with pytest.raises(ValueError, match="split"):
        math_task.load_math("validation", "fixture")
    with pytest.raises(ValueError, match="source"):
        math_task.load_math("train", "disk")


def test_math_hub_branch_concatenates_the_seven_configs(monkeypatch):
    raws = records(math_task.FIXTURE)
    tables = {
        (math_task.TRAIN_HUB, subject, "train"): [raw for raw in raws if config_of(raw["type"]) == subject]
        for subject in math_task.SUBJECTS
    }
    math500 = [
        {"problem": raw["problem"], "solution": raw["solution"], "answer": math_task.solution_answer(raw["solution"]),
         "subject": raw["type"], "level": i + 1, "unique_id": f"test/x/{i}.json"}
        for i, raw in enumerate(raws[:4])
    ]
    tables[(math_task.TEST_HUB, None, "test")] = math500
    calls = fake_datasets(monkeypatch, tables)

    train = math_task.load_math("train")
    assert calls == [(math_task.TRAIN_HUB, subject, "train") for subject in math_task.SUBJECTS]
    assert len(train) == 36 and len({row["id"] for row in train}) == 36
    expected = [
        (subject, i, raw)
        for subject in math_task.SUBJECTS
        for i, raw in enumerate(tables[(math_task.TRAIN_HUB, subject, "train")])
    ]
    for row, (subject, i, raw) in zip(train, expected):
        assert row["id"] == f"math/train/{subject}/{i}"
        assert row["problem"] == raw["problem"] and row["answer"] == math_task.solution_answer(raw["solution"])
        assert row["meta"]["source"] == f"EleutherAI/hendrycks_math[{subject}]"

    test = math_task.load_math("test")
    assert calls[-1] == (math_task.TEST_HUB, None, "test")
    assert [row["id"] for row in test] == [f"test/x/{i}.json" for i in range(4)]
    assert [row["meta"]["level"] for row in test] == [1, 2, 3, 4]
    assert test[0]["answer"] == "5" and test[0]["meta"]["subject"] == "Algebra"

    tables[(math_task.TRAIN_HUB, "geometry", "train")] = [{**GOOD, "solution": "no box"}]
    with pytest.raises(ValueError, match=r"EleutherAI/hendrycks_math\[geometry\] row math/train/geometry/0: "):
        math_task.load_math("train")


# ---------------------------------------------------------------- MMLU


def test_mmlu_fixture_counts_and_letters():
    raws = records(mmlu.FIXTURE)
    for subject in mmlu.SUBJECTS:
        rows = mmlu.load_mmlu(subject, "fixture")
        assert len(rows) == 6 and all(row["meta"]["subject"] == subject for row in rows)
        mine = [raw for raw in raws if raw["subject"] == subject]
        for row, raw in zip(rows, mine):
            assert row["answer"] == "ABCD"[raw["answer"]]
            assert row["problem"].startswith(raw["question"] + "\n(A) ")
            for letter, choice in zip("ABCD", raw["choices"]):
                assert f"\n({letter}) {choice}\n" in row["problem"]
        assert len({row["answer"] for row in rows}) >= 3
    json.dumps(mmlu.load_mmlu("college_biology", "fixture"))


def test_mmlu_convert_exactly():
    raw = {"question": "What is 2+2?", "subject": "college_physics", "choices": ["3", "4", "5", "22"], "answer": 1}
    assert mmlu.convert(raw, "mmlu/college_physics/0", "src") == {
        "id": "mmlu/college_physics/0",
        "problem": "What is 2+2?\n(A) 3\n(B) 4\n(C) 5\n(D) 22\nAnswer with the letter of the correct choice.",
        "answer": "B",
        "meta": {"subject": "college_physics", "choices": ["3", "4", "5", "22"], "source": "src"},
    }


MMLU_GOOD = {"question": "q", "subject": "college_biology", "choices": ["a", "b", "c", "d"], "answer": 3}


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({**MMLU_GOOD, "answer": 4}, "answer 4"),
        ({**MMLU_GOOD, "answer": -1}, "answer -1"),
        ({**MMLU_GOOD, "answer": True}, "answer True"),
        ({**MMLU_GOOD, "answer": "B"}, "answer 'B'"),
        ({**MMLU_GOOD, "choices": ["a", "b", "c"]}, "choices"),
        ({**MMLU_GOOD, "choices": ["a", "b", "c", 4]}, "choices"),
        ({k: v for k, v in MMLU_GOOD.items() if k != "question"}, "question None"),
        ({k: v for k, v in MMLU_GOOD.items() if k != "subject"}, "subject None"),
    ],
)
def test_malformed_mmlu_rows_raise_naming_the_row(raw, problem):
    with pytest.raises(ValueError, match=r"cais/mmlu\[college_biology\] row mmlu/college_biology/5: ") as error:
        mmlu.convert(raw, "mmlu/college_biology/5", "cais/mmlu[college_biology]")
    assert problem in str(error.value)


def test_mmlu_unknown_subject_and_source():
    with pytest.raises(ValueError, match="college_physics, college_chemistry, college_biology"):
        mmlu.load_mmlu("astronomy", "fixture")
    with pytest.raises(ValueError, match="source"):
        mmlu.load_mmlu("college_physics", "disk")


def test_mmlu_hub_branch(monkeypatch):
    raws = records(mmlu.FIXTURE)
    tables = {(mmlu.HUB, s, "test"): [raw for raw in raws if raw["subject"] == s] for s in mmlu.SUBJECTS}
    calls = fake_datasets(monkeypatch, tables)
    rows = mmlu.load_mmlu("college_chemistry")
    assert calls == [("cais/mmlu", "college_chemistry", "test")]
    assert [row["id"] for row in rows] == [f"mmlu/college_chemistry/{i}" for i in range(6)]
    fixture_rows = mmlu.load_mmlu("college_chemistry", "fixture")
    assert [(r["problem"], r["answer"]) for r in rows] == [(r["problem"], r["answer"]) for r in fixture_rows]


# ---------------------------------------------------------------- Countdown


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


def test_mmlu_prompts_ask_for_a_boxed_letter_not_a_number():
    from klrl.tasks import MATH_INSTRUCTION, MMLU_INSTRUCTION, get_task
    from klrl.rewards import REWARDS

    for subject in mmlu.SUBJECTS:
        task = get_task("mmlu-" + subject.replace("_", "-"))
        assert task.instruction == MMLU_INSTRUCTION != MATH_INSTRUCTION
        assert "\\boxed{B}" in task.instruction and not any(digit in task.instruction for digit in "0123456789")
    reward = REWARDS[get_task("mmlu-college-physics").reward]
    assert reward(["so \\boxed{C}", "so \\boxed{12}"], ["C", "C"]) == [1.0, 0.0]
