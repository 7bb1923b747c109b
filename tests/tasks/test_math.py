"""klrl.tasks.math: MATH / MATH-500 rows from the fixture and from the Hub, answers, errors.

Offline only: the Hub branch is exercised by a fake `datasets` module that serves the raw
fixture rows in the Hub's format, and sockets are blocked for every task test (tests/tasks/conftest.py).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from klrl.tasks import math as math_task

from conftest import records


def config_of(math_type: str) -> str:
    return math_type.lower().replace(" & ", "_and_").replace(" ", "_")


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


def test_math_hub_branch_concatenates_the_seven_configs(fake_datasets):
    raws = records(math_task.FIXTURE)
    tables = {
        (math_task.TRAIN_HUB, subject, "train"): [raw for raw in raws if config_of(raw["type"]) == subject]
        for subject in math_task.SUBJECTS
    }
    math500 = [
        {
            "problem": raw["problem"],
            "solution": raw["solution"],
            "answer": math_task.solution_answer(raw["solution"]),
            "subject": raw["type"],
            "level": i + 1,
            "unique_id": f"test/x/{i}.json",
        }
        for i, raw in enumerate(raws[:4])
    ]
    tables[(math_task.TEST_HUB, None, "test")] = math500
    calls = fake_datasets(tables)

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
