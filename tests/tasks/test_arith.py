"""klrl.tasks.arith: correct, distinct, deterministic rows; words; the held-out partition; the pretraining corruption."""

import random

import pytest

from klrl.grading.rewards import get_reward
from klrl.tasks.arith import corrupt, generate, is_test_problem, pretraining_example, space_size


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
