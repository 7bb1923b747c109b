"""klrl.tasks.mmlu: the fixture, conversion of a Hub row, errors naming the row, the Hub branch, the letter prompt."""

from __future__ import annotations

import json

import pytest

from klrl.tasks import mmlu

from conftest import records


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


def test_mmlu_hub_branch(fake_datasets):
    raws = records(mmlu.FIXTURE)
    tables = {(mmlu.HUB, s, "test"): [raw for raw in raws if raw["subject"] == s] for s in mmlu.SUBJECTS}
    calls = fake_datasets(tables)
    rows = mmlu.load_mmlu("college_chemistry")
    assert calls == [("cais/mmlu", "college_chemistry", "test")]
    assert [row["id"] for row in rows] == [f"mmlu/college_chemistry/{i}" for i in range(6)]
    fixture_rows = mmlu.load_mmlu("college_chemistry", "fixture")
    assert [(r["problem"], r["answer"]) for r in rows] == [(r["problem"], r["answer"]) for r in fixture_rows]


def test_mmlu_prompts_ask_for_a_boxed_letter_not_a_number():
    from klrl.tasks import MATH_INSTRUCTION, MMLU_INSTRUCTION, get_task
    from klrl.grading.rewards import REWARDS

    for subject in mmlu.SUBJECTS:
        task = get_task("mmlu-" + subject.replace("_", "-"))
        assert task.instruction == MMLU_INSTRUCTION != MATH_INSTRUCTION
        assert "\\boxed{B}" in task.instruction and not any(digit in task.instruction for digit in "0123456789")
    reward = REWARDS[get_task("mmlu-college-physics").reward]
    assert reward(["so \\boxed{C}", "so \\boxed{12}"], ["C", "C"]) == [1.0, 0.0]
