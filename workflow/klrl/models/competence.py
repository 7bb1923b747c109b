"""The competence check of a freshly built base: pass@1 on held-out problems, greedy and at T = 1.

For each task of `check_tasks`, the first `check_problems` rows of its test split with data seed
0 (the problems a config's `prepare-data` writes for the default seed: a config that evaluates
150 problems scores these same 150), prompted as the trainer and lm-eval prompt them (problem +
the task's instruction, one user turn through the chat template), completed by the trainer's
sampler (`klrl.training.sampling.HFSampler`, stopping at the model's stop tokens, 8 new tokens
as the configs' evaluation) and graded by the task's reward in `klrl.grading.rewards`:

    greedy   one completion per problem at temperature 0: the same completions as
             `klrl evaluate --greedy` (greedy parity, tests/evaluation/test_harness.py), so the same score;
    t1       `check_samples` completions per problem at temperature 1, top-p 1: the paper's pass@1,
             which `klrl evaluate` estimates from other samples of the same distribution.
"""

from __future__ import annotations

import torch

from klrl.grading.rewards import get_reward
from klrl.tasks import get_task, load_rows
from klrl.training.periodic_eval import problem_pass_at_1
from klrl.training.prompts import stop_token_ids
from klrl.training.sampling import HFSampler

MAX_NEW_TOKENS = 8  # the configs' evaluation.max_new_tokens; a tiny answer takes at most 7
DATA_SEED = 0  # the default `data.<task>.seed`


def held_out_rows(task_name: str, problems: int) -> list[dict]:
    """The task's first `problems` test rows, with the prompt `klrl prepare-data` gives them."""
    task = get_task(task_name)
    rows = load_rows(task, "test", seed=DATA_SEED, size=problems)
    return [dict(row, prompt=row["problem"] + task.instruction) for row in rows]


@torch.no_grad()
def measure_competence(model, tokenizer, config) -> dict:
    """{task: {"greedy": pass@1, "t1": pass@1, "problems": n, "samples": k}} over `config.check_tasks`
    (a TinyConfig); sampling seeded by `config.seed`."""
    stops = stop_token_ids(tokenizer)
    greedy = HFSampler(stops, tokenizer.pad_token_id, MAX_NEW_TOKENS, temperature=0.0)
    sampled = HFSampler(stops, tokenizer.pad_token_id, MAX_NEW_TOKENS, temperature=1.0, top_p=1.0)
    generator = torch.Generator().manual_seed(config.seed)
    scores = {}
    for task in config.check_tasks:
        rows = held_out_rows(task, config.check_problems)
        reward = get_reward(get_task(task).reward)
        first = problem_pass_at_1(model, tokenizer, greedy, rows, reward, 1, None)
        many = problem_pass_at_1(model, tokenizer, sampled, rows, reward, config.check_samples, generator)
        scores[task] = {
            "greedy": round(sum(first) / len(first), 4),
            "t1": round(sum(many) / len(many), 4),
            "problems": len(rows),
            "samples": config.check_samples,
        }
    return scores


def below_floor(competence: dict, floor: dict[str, float]) -> list[str]:
    """Each floor the competence misses, as '<task>/<decoding> <score> < <floor>', in floor order.

    >>> below_floor({"arith": {"greedy": 0.95, "t1": 0.2}}, {"arith/greedy": 0.9, "arith/t1": 0.3})
    ['arith/t1 0.200 < 0.300']
    """
    misses = []
    for key, least in floor.items():
        task, decoding = key.split("/")
        score = competence[task][decoding]
        if score < least:
            misses.append(f"{key} {score:.3f} < {least:.3f}")
    return misses
