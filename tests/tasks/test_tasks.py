"""klrl.tasks: the registry's errors and rewards."""

import pytest

from klrl.grading.rewards import get_reward
from klrl.tasks import TASKS, get_task, load_rows


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
