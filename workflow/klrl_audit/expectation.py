"""The exact expected gradient of a loss function on the toy policy, in one call of the function.

A loss function takes a `GroupBatch` (the tensors a trainer holds for a batch of groups of GROUP
sequences, the task reward 0) and returns the scalar loss. Its expected gradient over batches of
one group drawn from q (πθ on-policy, the stale μ off-policy, the engine's policy e under a
mismatch: ENGINE_SCALE Gaussian noise on πθ's logits, seed ENGINE_SEED, while the trainer's old
log-probs are πθ's),
    E[∇L] = Σ_{y1, y2} q(y1) q(y2) ∇L(y1, y2),
comes from ONE call on all n² groups at once: every row's log-probs enter as
    log πθ + (w − 1)·(log πθ − sg(log πθ)),   w = n²·q(y1)·q(y2),
equal in value and with the gradient scaled by w. That is exact whenever the loss on several
groups is the mean of its losses on each, which a mean over sequences or over tokens is on the
toy's fixed-length sequences.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from klrl_audit.targets import enumerate_sequences
from klrl_audit.toy import ToyProblem

POLICIES = ("on", "off", "mismatch")
GROUP = 2  # sequences per group: the smallest group a leave-one-out or group-normalised baseline allows
ENGINE_SCALE, ENGINE_SEED = 0.3, 5  # the engine's logits under a mismatch: πθ's plus this much Gaussian noise


@dataclass
class GroupBatch:
    """Every pair of toy sequences, each pair a group in consecutive rows (B = GROUP·n² rows)."""

    seqs: torch.Tensor  # (B, T) token ids
    logp: torch.Tensor  # (B, T) log πθ per token, differentiable
    ref_logp: torch.Tensor  # (B, T) log πref
    sampling_logp: torch.Tensor  # (B, T) the trainer's old log-probs: log μ off-policy, sg(log πθ) otherwise
    engine_logp: torch.Tensor  # (B, T) the rollout engine's log-probs: sampling_logp but under a mismatch
    off_policy: bool
    mask: torch.Tensor  # (B, T) completion mask (all ones: fixed-length sequences)
    rewards: torch.Tensor  # (B,) the task reward: 0, so that only the KL part's gradient is left

    @property
    def groups(self) -> int:
        return self.seqs.shape[0] // GROUP


def engine_theta(problem: ToyProblem) -> torch.Tensor:
    """The rollout engine's logits under a mismatch: πθ's perturbed."""
    noise = torch.randn(problem.theta.shape, generator=torch.Generator().manual_seed(ENGINE_SEED), dtype=torch.float64)
    return problem.theta + ENGINE_SCALE * noise


def expected_gradient(
    loss: Callable[[GroupBatch], torch.Tensor], policy: str, problem: ToyProblem, tokens_averaged: bool = False
) -> torch.Tensor:
    """E[∇ loss] over batches of one group sampled as `policy` says, exactly; multiplied by T when
    `tokens_averaged` (the loss averages its KL term over the T tokens of every toy sequence)."""
    if policy not in POLICIES:
        raise ValueError(f"policy: {policy!r} is not one of {', '.join(POLICIES)}")
    theta = problem.theta.clone().requires_grad_(True)
    e = enumerate_sequences(problem, "on" if policy == "mismatch" else policy, theta)
    n, horizon = e.seqs.shape
    sampling = e.logp.detach() if e.behaviour_logp is None else e.behaviour_logp
    engine = problem.space.token_logp(engine_theta(problem), e.seqs) if policy == "mismatch" else sampling
    q = (engine * e.mask).sum(-1).exp()
    first, second = (index.reshape(-1) for index in torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij"))
    rows = torch.stack([first, second], -1).reshape(-1)
    weight = (n * n * q[first] * q[second]).repeat_interleave(GROUP)[:, None]
    logp = e.logp[rows]
    batch = GroupBatch(
        seqs=e.seqs[rows],
        logp=logp + (weight - 1) * (logp - logp.detach()),
        ref_logp=e.ref_logp[rows],
        sampling_logp=sampling[rows],
        engine_logp=engine[rows],
        off_policy=e.behaviour_logp is not None,
        mask=e.mask[rows],
        rewards=torch.zeros(rows.shape[0], dtype=torch.float64),
    )
    value = loss(batch)
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"the loss function returned {type(value).__name__}, not a scalar tensor")
    if value.numel() != 1:
        raise ValueError(f"the loss function returned a tensor of shape {tuple(value.shape)}, not a scalar")
    if not value.requires_grad:
        return torch.zeros_like(theta)
    (grad,) = torch.autograd.grad(value.reshape(()), theta, allow_unused=True)
    grad = torch.zeros_like(theta) if grad is None else grad
    return grad * horizon if tokens_averaged else grad
