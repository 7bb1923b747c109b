"""The trainer's loss as a pure function of tensors: what one update differentiates.

Inputs are (B, T) log-probs of the sampled tokens under the policy πθ (with gradient), the
reference πref and the behaviour policy μ (None on-policy), (B,) task rewards and the (B, T)
completion mask (1 up to and including EOS, 0 on padding); rows come in groups of
`group_size` samples of one prompt. In order:
 1. penalty    β·Σ_t K̂_t from `klrl.objective.kl.kl_terms` when the KL sits in the reward (detached);
 2. advantages A from R̃ = R − penalty within each group (`klrl.objective.policy_terms.advantages`);
 3. tokens     policy term −clamp(πθ/a, 0, c)·A (or PPO's clipped term) plus the KL loss term,
               a = μ off-policy, a = the pre-update πθ on-policy (ratio 1, gradient ∇log πθ),
               both from one log ratio (`klrl.objective.kl.importance_log_ratio`);
 4. aggregate  seq-sum or token-mean (`klrl.objective.policy_terms.aggregate`), over the denominator of
               the whole (mini)batch the rows belong to.
`batch_loss` is 1-4 over a batch in one piece. The learner (`klrl.training.learner`) computes
1-2 once per step and 3-4 per micro-batch with `update_loss`, which is the same function; the
exact toy proofs (`klrl.toy.exact`) drive `batch_loss` itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from klrl.objective.kl_config import KLConfig
from klrl.objective.kl import at_least_fp32, importance_log_ratio, kl_terms
from klrl.objective.policy_terms import aggregate, advantages, normaliser, policy_loss_tokens, ppo_loss_tokens


@dataclass(frozen=True)
class LossConfig:
    kl: KLConfig
    group_size: int
    advantage: str = "rloo"
    aggregation: str = "seq-sum"
    ratio_clamp: float | None = None  # truncate πθ/μ at c in the policy term
    ppo_clip: float | None = None  # PPO's clipped term instead of the truncated ratio


class LossParts(NamedTuple):
    policy: torch.Tensor  # scalar: the aggregated policy term
    kl: torch.Tensor  # scalar: the aggregated KL loss term


def reward_penalty(config: LossConfig, logp, ref_logp, mask) -> torch.Tensor:
    """(B,) β·Σ_t K̂_t to subtract from the rewards (zero unless the KL is in the reward), detached."""
    with torch.no_grad():
        return kl_terms(config.kl, logp.detach(), ref_logp, mask).reward_penalty


def penalised_advantages(config: LossConfig, rewards, logp, ref_logp, mask) -> torch.Tensor:
    """(B,) advantages of the penalised rewards R̃ = R − penalty, within each group."""
    penalty = reward_penalty(config, logp, ref_logp, mask)
    return advantages(at_least_fp32(rewards).to(penalty.device) - penalty, config.group_size, config.advantage)


def token_losses(config: LossConfig, logp, ref_logp, log_ratio, advantages, mask) -> tuple[torch.Tensor, torch.Tensor]:
    """The (B, T) policy term and KL loss term; `log_ratio` is `importance_log_ratio` of logp
    against the anchor (μ off-policy, the pre-update πθ on-policy)."""
    if config.ppo_clip is not None:
        policy = ppo_loss_tokens(log_ratio, advantages, mask, config.ppo_clip)
    else:
        policy = policy_loss_tokens(log_ratio, advantages, mask, config.ratio_clamp)
    return policy, kl_terms(config.kl, logp, ref_logp, mask, log_ratio).loss_tokens


def update_loss(
    config: LossConfig, logp, ref_logp, log_ratio, advantages, mask, denominator, sample_weights=None
) -> LossParts:
    """The loss of these rows, given their advantages and the `denominator` (`normaliser`) of
    the (mini)batch they belong to: the parts of a batch sum to its loss. `sample_weights`
    ((B, T) constants, `klrl.objective.engine_correction`) multiply both token terms."""
    policy, kl = token_losses(config, logp, ref_logp, log_ratio, advantages, mask)
    if sample_weights is not None:
        policy, kl = policy * sample_weights, kl * sample_weights
    mask = mask.to(policy.dtype)
    return LossParts(aggregate(policy, mask, denominator=denominator), aggregate(kl, mask, denominator=denominator))


def batch_loss(
    config: LossConfig, logp, ref_logp, behaviour_logp, rewards, mask, sample_weights=None
) -> tuple[torch.Tensor, LossParts]:
    """The loss of one batch in one piece (one update): penalty, advantages, token terms,
    aggregation. behaviour_logp is μ's log-probs off-policy, None on-policy; `sample_weights`
    the engine correction's weights, if any."""
    anchor_logp = logp.detach() if behaviour_logp is None else behaviour_logp
    adv = penalised_advantages(config, rewards, logp, ref_logp, mask)
    log_ratio = importance_log_ratio(logp, anchor_logp)
    parts = update_loss(
        config, logp, ref_logp, log_ratio, adv, mask, normaliser(mask, config.aggregation), sample_weights
    )
    return parts.policy + parts.kl, parts
