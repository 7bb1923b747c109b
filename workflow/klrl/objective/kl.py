"""The KL penalty as tensors: per-token estimates, the reward penalty and loss term of a
configuration, and their diagnostics.

Every KL term the trainer uses comes from `kl_terms`; nothing else computes one. The estimators,
placements and corrections themselves (and what each one's gradient is) are declared in
`klrl.objective.estimators`. The importance ratio's log is `importance_log_ratio`, computed once and
handed to whatever weights by it. The diagnostics (every estimator, clamp and weight counts) are
`kl_stats`, computed once per step.

Notation (docs/paper.md). For completion token t of y ~ q(·|x):
    δ_t = log πθ(y_t|x,y<t) − log πref(y_t|x,y<t),   ρ_t = exp(−δ_t)
    K1_t = δ_t      K2_t = ½ δ_t²      K3_t = ρ_t − 1 + δ_t
A sequence estimate is the masked sum over tokens: K̂ = Σ_t K̂_t.

Placements of the estimate (β ≥ 0):
    reward  R̃ = R − β·stopgrad(K̂): returned as `reward_penalty`, the trainer subtracts it
            before computing advantages, so only the score-function term survives;
    loss    + β·K̂_t per token, differentiated: returned as `loss_tokens`;
    both    the two at once.

Off-policy corrections (rollouts from a behaviour policy μ; ω_t = πθ/μ per token):
    token-is     the in-loss term becomes ω_t·β·K̂_t (ω_t carries gradient; RPG, TRL's
                 use_bias_correction_kl). Unbiased for the token-level reverse-KL gradient.
    sequence-is  K1's score term as a loss: β·stopgrad(Σ_s δ_s)·W, W = Π_t ω_t (with gradient).
    prefix-is    the same, weighted per prefix: Σ_s β·stopgrad(δ_s)·W_{≤s}, W_{≤s} = Π_{t≤s} ω_t.
                 Both are unbiased for the sequence-level reverse-KL gradient, on- and
                 off-policy; prefix-is has the lower variance (see `klrl.toy`).
On-policy, μ is πθ itself (detached), so ω_t = 1 with the gradient of log πθ.
Optional truncation caps ω (or W) at c, keeping the gradient of log πθ (truncated IS).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch

from klrl.objective import estimators
from klrl.objective.kl_config import KLConfig, check_choice


def at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    """x in float32, or float64 if it already is: bf16/fp16 log-probs are never used as they are."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


class TokenKL(NamedTuple):
    values: torch.Tensor  # per-token estimates (float32 or float64), same shape as the inputs
    clamped: torch.Tensor  # bool, True where a clamp changed the token's estimate


def token_kl(
    logp: torch.Tensor,
    ref_logp: torch.Tensor,
    estimator: str,
    *,
    log_ratio_clamp: float | None = None,
    value_clamp: float | None = None,
) -> TokenKL:
    """Per-token KL estimates, in float32 or wider whatever the input dtype.

    >>> out = token_kl(torch.tensor([0.5, -0.5]), torch.zeros(2), "k2")
    >>> out.values.tolist(), out.clamped.tolist()
    ([0.125, 0.125], [False, False])
    >>> token_kl(torch.tensor([20.0]), torch.zeros(1), "k1", log_ratio_clamp=10).values.tolist()
    [10.0]
    """
    check_choice("token_kl", "estimator", estimator, tuple(estimators.ESTIMATORS))
    delta = at_least_fp32(logp) - at_least_fp32(ref_logp)
    clamped = torch.zeros_like(delta, dtype=torch.bool)
    if log_ratio_clamp is not None:
        clamped |= delta.detach().abs() > log_ratio_clamp
        delta = delta.clamp(-log_ratio_clamp, log_ratio_clamp)
    values = estimators.ESTIMATORS[estimator].value(delta)
    if value_clamp is not None:
        clamped |= values.detach().abs() > value_clamp
        values = values.clamp(-value_clamp, value_clamp)
    return TokenKL(values, clamped)


@dataclass
class KLTerms:
    reward_penalty: torch.Tensor  # (B,) detached β·Σ_t K̂_t; subtract from the reward
    loss_tokens: torch.Tensor  # (B, T) differentiable per-token loss term, zero off the mask


def importance_log_ratio(logp: torch.Tensor, anchor_logp: torch.Tensor) -> torch.Tensor:
    """(B, T) log ω_t = log πθ − log a per token, in float32 or wider: the importance ratio's
    log, a = μ off-policy and the pre-update πθ on-policy (constants). Computed once per forward
    and handed to the policy term, the KL term's correction and the diagnostics.

    >>> importance_log_ratio(torch.tensor([[0.0, -1.0]]), torch.tensor([[-1.0, -1.0]])).tolist()
    [[1.0, 0.0]]
    """
    return at_least_fp32(logp) - at_least_fp32(anchor_logp)


def _importance_weight(log_w: torch.Tensor, truncation: float | None) -> torch.Tensor:
    """exp(log_w), capped at `truncation` in value while keeping the gradient of log_w."""
    if truncation is not None:
        log_w = log_w - (log_w.detach() - math.log(truncation)).clamp(min=0)
    return torch.exp(log_w)


def correction_weight(config: KLConfig, log_ratio: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The (B, T) importance weight of `config`'s correction on the KL term, from the (B, T)
    `log_ratio`: ω_t (token-is), W = Π_t ω_t (sequence-is), W_≤t = Π_{s≤t} ω_s (prefix-is),
    truncated at `is_truncation`; ones without a correction."""
    masked = log_ratio * mask  # log ω_t on the completion
    if config.correction == "token-is":
        return _importance_weight(masked, config.is_truncation)
    if config.correction == "sequence-is":
        return _importance_weight(masked.sum(-1, keepdim=True), config.is_truncation).expand_as(masked)
    if config.correction == "prefix-is":
        return _importance_weight(masked.cumsum(-1), config.is_truncation)
    return torch.ones_like(masked)


def kl_terms(
    config: KLConfig,
    logp: torch.Tensor,
    ref_logp: torch.Tensor,
    mask: torch.Tensor,
    log_ratio: torch.Tensor | None = None,
) -> KLTerms:
    """The reward penalty and the loss term of `config` for one batch of (B, T) tensors.

    logp carries the gradient, ref_logp is a constant; `log_ratio` (`importance_log_ratio`,
    with the gradient of logp) weights the loss term, on-policy (None) that of logp against
    itself detached. The loss term is per token: aggregate it with the policy loss.
    """
    beta = config.beta
    values = token_kl(
        logp, ref_logp, config.estimator, log_ratio_clamp=config.log_ratio_clamp, value_clamp=config.value_clamp
    ).values
    mask = mask.to(values.dtype)
    values = values * mask
    if log_ratio is None:
        log_ratio = importance_log_ratio(logp, logp.detach())
    weight = correction_weight(config, log_ratio, mask)
    reward_penalty = values.new_zeros(values.shape[0])
    loss_tokens = torch.zeros_like(values)
    if config.correction in ("sequence-is", "prefix-is"):
        loss_tokens = beta * values.detach() * weight * mask
    else:
        if config.placement in ("reward", "both"):
            reward_penalty = beta * values.detach().sum(-1)
        if config.placement in ("loss", "both"):
            loss_tokens = beta * values * weight * mask
    return KLTerms(reward_penalty=reward_penalty, loss_tokens=loss_tokens)


@torch.no_grad()
def kl_stats(
    config: KLConfig,
    logp: torch.Tensor,
    ref_logp: torch.Tensor,
    mask: torch.Tensor,
    log_ratio: torch.Tensor | None = None,
) -> dict[str, float]:
    """Diagnostics of one batch: every estimator's sequence estimate (batch mean), how often
    `config`'s clamps and importance-weight truncation act, the weights (of `log_ratio`, zero
    on-policy when None) and the mean penalty."""
    estimate = token_kl(
        logp, ref_logp, config.estimator, log_ratio_clamp=config.log_ratio_clamp, value_clamp=config.value_clamp
    )
    mask = mask.to(estimate.values.dtype)
    n_tokens = mask.sum().clamp(min=1).item()
    n_seqs = max(mask.shape[0], 1)
    stats = {}
    for name in estimators.ESTIMATORS:
        values = token_kl(logp, ref_logp, name).values
        stats[f"kl/{name}"] = ((values * mask).sum() / n_seqs).item()
    stats["kl/clamped_tokens"] = (estimate.clamped & mask.bool()).sum().item()
    stats["kl/clamped_frac"] = stats["kl/clamped_tokens"] / n_tokens
    if log_ratio is None:
        log_ratio = importance_log_ratio(logp, logp.detach())
    w = correction_weight(config, log_ratio, mask)[mask.bool()]
    stats["kl/is_weight_mean"] = w.mean().item() if w.numel() else 1.0
    stats["kl/is_weight_max"] = w.max().item() if w.numel() else 1.0
    truncation = config.is_truncation
    truncated = (w >= truncation * (1 - 1e-6)).sum().item() if truncation is not None else 0
    stats["kl/is_truncated_frac"] = truncated / n_tokens
    penalty = kl_terms(config, logp, ref_logp, mask).reward_penalty
    stats["kl/reward_penalty_mean"] = penalty.mean().item() if penalty.numel() else 0.0
    return stats
