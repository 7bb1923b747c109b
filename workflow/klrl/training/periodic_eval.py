"""The trainer's periodic evaluation: pass@1 on a fixed held-out subset, by sampling.

pass@1 = the mean reward over `n` samples per problem (temperature 1, top-p 1, the paper's
metric), which is the probability that one sample is correct, averaged over problems.
"""

from __future__ import annotations

import torch

from klrl.training.prompts import encode_prompts
from klrl.training.sampling import HFSampler, completion_texts


@torch.no_grad()
def _sample_rewards(
    model, tokenizer, sampler: HFSampler, rows: list[dict], reward_fn, n: int, generator, chunk: int
) -> list[float]:
    """The rewards of `n` samples of each row (row-major), sampled in chunks of `chunk` sequences."""
    group = [row for row in rows for _ in range(n)]
    rewards: list[float] = []
    for start in range(0, len(group), chunk):
        part = group[start : start + chunk]
        rollout = sampler.sample(model, encode_prompts(tokenizer, part), generator)
        rewards += reward_fn(completion_texts(tokenizer, rollout), [row["answer"] for row in part])
    return rewards


def pass_at_1(
    model, tokenizer, sampler: HFSampler, rows: list[dict], reward_fn, n: int, generator, chunk: int = 256
) -> float:
    """Mean reward of `n` samples for each row, averaged over rows."""
    rewards = _sample_rewards(model, tokenizer, sampler, rows, reward_fn, n, generator, chunk)
    return sum(rewards) / len(rewards)


def problem_pass_at_1(
    model, tokenizer, sampler: HFSampler, rows: list[dict], reward_fn, n: int, generator, chunk: int = 256
) -> list[float]:
    """Per row, the mean reward of its `n` samples (what `pass_at_1` averages)."""
    rewards = _sample_rewards(model, tokenizer, sampler, rows, reward_fn, n, generator, chunk)
    return [sum(rewards[i * n : (i + 1) * n]) / n for i in range(len(rows))]
