"""klrl.evaluation.lm_eval_tasks.hooks: grading is the training reward."""

from klrl.evaluation.lm_eval_tasks.hooks import grade
from klrl.grading.rewards import math_reward


def test_grading_is_the_training_reward():
    completions = [r"\boxed{\frac12}", r"\boxed{0.5}", r"\boxed{1/3}", "0.5"]
    graded = grade({"answer": "0.5", "reward": "math"}, [completions])
    assert graded["rewards"] == math_reward(completions, ["0.5"] * 4) == [1.0, 1.0, 0.0, 0.0]
    assert graded["pass@1"] == 0.5
