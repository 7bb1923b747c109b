"""The policy-gradient side of the loss: advantages, the per-token policy term, aggregation.

Same contract as `klrl.objective.kl`: (B, T) tensors with a mask; rewards and advantages are (B,),
with the G samples of one prompt stored next to each other (B = prompts × G).
"""

from __future__ import annotations

import torch

from klrl.objective.kl import at_least_fp32
from klrl.objective.choices import ADVANTAGES, AGGREGATIONS


def _groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    if group_size < 2 or rewards.numel() % group_size:
        raise ValueError(f"group_size: {group_size} must be ≥ 2 and divide the batch of {rewards.numel()} rewards")
    return rewards.reshape(-1, group_size)


def advantages(rewards: torch.Tensor, group_size: int, kind: str = "rloo") -> torch.Tensor:
    """Per-sample advantages within each group of `group_size` samples of the same prompt.

    rloo:       A_i = R_i − mean_{j≠i} R_j (leave-one-out baseline; unbiased)
    group-mean: A_i = R_i − mean_j R_j (Dr. GRPO; no division by the std)
    >>> advantages(torch.tensor([1.0, 0.0, 0.0, 1.0]), 2).tolist()
    [1.0, -1.0, -1.0, 1.0]
    >>> advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), 4, "group-mean").tolist()
    [0.75, -0.25, -0.25, -0.25]
    """
    grouped = _groups(rewards, group_size)
    total = grouped.sum(-1, keepdim=True)
    if kind == "rloo":
        baseline = (total - grouped) / (group_size - 1)
    elif kind == "group-mean":
        baseline = total / group_size
    else:
        raise ValueError(f"advantage kind: {kind!r} is not one of {', '.join(ADVANTAGES)}")
    return (grouped - baseline).reshape(-1)


def policy_loss_tokens(
    log_ratio: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, ratio_clamp: float | None = None
) -> torch.Tensor:
    """Per-token −clamp(πθ/a, 0, c)·A (truncated importance sampling, no PPO clip), from the
    (B, T) `klrl.objective.kl.importance_log_ratio` log πθ − log a.

    On-policy the anchor a is πθ detached: the ratio is 1 and its gradient ∇log πθ.
    >>> logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    >>> policy_loss_tokens(logp - logp.detach(), torch.tensor([2.0]), torch.tensor([[1.0, 0.0]])).tolist()
    [[-2.0, -0.0]]
    """
    ratio = torch.exp(log_ratio)
    if ratio_clamp is not None:
        ratio = ratio.clamp(0.0, ratio_clamp)
    return -ratio * at_least_fp32(advantages)[:, None] * mask.to(ratio.dtype)


def ppo_loss_tokens(log_ratio: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, clip: float) -> torch.Tensor:
    """Per-token PPO clipped objective −min(r·A, clip(r, 1−ε, 1+ε)·A), r = πθ/a = exp(`log_ratio`)."""
    ratio = torch.exp(log_ratio)
    adv = at_least_fp32(advantages)[:, None]
    clipped = ratio.clamp(1 - clip, 1 + clip)
    return -torch.minimum(ratio * adv, clipped * adv) * mask.to(ratio.dtype)


def normaliser(mask: torch.Tensor, mode: str = "seq-sum", token_count: torch.Tensor | None = None) -> torch.Tensor:
    """What `aggregate` divides the masked sum of a batch's per-token losses by.

    seq-sum:    the batch's rows (sum over each sequence's tokens, mean over sequences: the
                paper's equations);
    token-mean: the batch's unmasked tokens, `token_count` if given (length-normalised). Under
                data parallelism pass the mean over processes of their token counts, so that the
                processes' losses, averaged as FSDP averages gradients, are the whole batch's.
    >>> normaliser(torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]), "token-mean").item()
    3.0
    """
    if mode == "seq-sum":
        return torch.tensor(float(mask.shape[0]), device=mask.device)
    if mode == "token-mean":
        return (mask.sum() if token_count is None else token_count).clamp(min=1)
    raise ValueError(f"aggregation: {mode!r} is not one of {', '.join(AGGREGATIONS)}")


def aggregate(
    loss_tokens: torch.Tensor, mask: torch.Tensor, mode: str = "seq-sum", denominator: torch.Tensor | None = None
) -> torch.Tensor:
    """Reduce per-token losses to a scalar: the masked sum over `denominator`, by default
    `normaliser(mask, mode)`. Rows that are a part of a batch (a micro-batch) pass the whole
    batch's denominator, so that the parts' losses sum to the batch's.

    >>> loss, mask = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    >>> aggregate(loss, mask, "seq-sum").item(), aggregate(loss, mask, "token-mean").item()
    (5.0, 2.5)
    """
    denominator = normaliser(mask, mode) if denominator is None else denominator
    return (loss_tokens * mask).sum() / denominator
