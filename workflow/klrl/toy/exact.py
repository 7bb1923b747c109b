"""Exact gradients on the toy policy, by enumerating every sequence, through the trainer's loss.

The estimate is the trainer's own: `klrl.objective.loss.batch_loss` on a batch of one group of G = 2
samples, the task reward 0 so that only the KL part of the objective is left: the reward
penalty, RLOO advantages of the penalised reward, the policy term −clamp(πθ/q, 0, c)·A, the KL
loss term, aggregation, the masks (EOS and padding when the space has an EOS) and clamps. Its
expectation over batches drawn from q,
    E[∇L] = ∇ Σ_{y1, y2} q(y1) q(y2) L(y1, y2)   (q held constant),
is one backward pass over all pairs of sequences. q is πθ on-policy and the stale μ off-policy.
Everything is float64 and divided by β.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from klrl.objective.engine_correction import EngineCorrection, engine_weights
from klrl.objective.kl import importance_log_ratio
from klrl.objective.kl_config import KLConfig
from klrl.objective.loss import LossConfig, batch_loss, reward_penalty, token_losses
from klrl.objective.policy_terms import advantages
from klrl_audit.expectation import GROUP
from klrl_audit.targets import enumerate_sequences
from klrl_audit.toy import ToyProblem


def toy_loss_config(config: KLConfig, **options) -> LossConfig:
    """The trainer's loss settings for `config` on batches of one group of GROUP samples."""
    return LossConfig(kl=config, group_size=GROUP, **options)


def expected_gradient(
    problem: ToyProblem,
    config: KLConfig | LossConfig,
    mode: str,
    engine_theta: torch.Tensor | None = None,
    correction: EngineCorrection | None = None,
) -> torch.Tensor:
    """E[∇ batch_loss] / β over batches of GROUP samples from q, exactly; zero for 'none'.

    With `engine_theta` the samples come from that engine policy instead of q, whose log-probs
    the trainer still recomputes as μ (πθ on-policy, the stale μ off-policy), each weighted by
    `correction` (klrl.objective.engine_correction) if one is given.
    """
    loss_config = config if isinstance(config, LossConfig) else toy_loss_config(config)
    theta = problem.theta.clone().requires_grad_(True)
    e = enumerate_sequences(problem, mode, theta)
    q, weights = e.q, None
    if engine_theta is not None:
        engine_logp = problem.space.token_logp(engine_theta, e.seqs)
        q = (engine_logp * e.mask).sum(-1).exp()
        if correction is not None:
            anchor_logp = e.logp.detach() if e.behaviour_logp is None else e.behaviour_logp
            weights, _ = engine_weights(correction, anchor_logp, engine_logp, e.mask)
    n = e.seqs.shape[0]
    first, second = (index.reshape(-1) for index in torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij"))
    rows = torch.stack([first, second], -1)  # (n², 2): every batch, its samples next to each other

    def loss_of(batch_rows: torch.Tensor) -> torch.Tensor:
        behaviour = None if e.behaviour_logp is None else e.behaviour_logp[batch_rows]
        rewards = torch.zeros(GROUP, dtype=torch.float64)
        sample_weights = None if weights is None else weights[batch_rows]
        loss, _ = batch_loss(
            loss_config,
            e.logp[batch_rows],
            e.ref_logp[batch_rows],
            behaviour,
            rewards,
            e.mask[batch_rows],
            sample_weights,
        )
        return loss

    losses = torch.func.vmap(loss_of)(rows)
    expectation = (q[first] * q[second] * losses).sum()
    if not expectation.requires_grad:
        return torch.zeros_like(theta)
    (grad,) = torch.autograd.grad(expectation, theta, allow_unused=True)
    return (torch.zeros_like(theta) if grad is None else grad) / (loss_config.kl.beta or 1.0)


@dataclass
class PerSequence:
    """Per-sequence pieces of a configuration's gradient estimate (all divided by β).

    The batch estimate for samples i with advantages A_i is mean_i[A_i·score_i + loss_i],
    where A is computed from −penalty by the trainer's advantage function.
    """

    q: torch.Tensor  # (S,)
    penalty: torch.Tensor  # (S,) reward penalty / β
    score: torch.Tensor  # (S, P) ∇ Σ_t −ω_t  (the policy term's gradient per unit advantage)
    loss: torch.Tensor  # (S, P) ∇ Σ_t loss_tokens_t / β


def per_sequence(problem: ToyProblem, config: KLConfig, mode: str) -> PerSequence:
    """The pieces, from the trainer's per-token terms (`klrl.objective.loss.token_losses`) with A = 1: each
    sequence's gradient is a row of the Jacobian of the per-sequence terms in θ (`torch.func.jacrev`)."""
    loss_config = toy_loss_config(config)

    def terms(theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        e = enumerate_sequences(problem, mode, theta)
        anchor_logp = e.logp.detach() if e.behaviour_logp is None else e.behaviour_logp
        log_ratio = importance_log_ratio(e.logp, anchor_logp)
        policy, kl = token_losses(loss_config, e.logp, e.ref_logp, log_ratio, torch.ones_like(e.q), e.mask)
        return (policy * e.mask).sum(-1), (kl * e.mask).sum(-1)

    e = enumerate_sequences(problem, mode, problem.theta)
    score, loss = (jacobian.reshape(e.seqs.shape[0], -1) for jacobian in torch.func.jacrev(terms)(problem.theta))
    beta = config.beta or 1.0
    penalty = reward_penalty(loss_config, e.logp, e.ref_logp, e.mask)
    return PerSequence(e.q, penalty.double() / beta, score, loss / beta)


def batch_estimates(
    pieces: PerSequence, n_batches: int, batch_size: int, generator: torch.Generator, chunk: int = 500
) -> torch.Tensor:
    """`n_batches` independent batch gradient estimates, (n_batches, P)."""
    out = []
    for start in range(0, n_batches, chunk):
        m = min(chunk, n_batches - start)
        idx = torch.multinomial(pieces.q, m * batch_size, replacement=True, generator=generator).reshape(m, batch_size)
        adv = advantages(-pieces.penalty[idx].reshape(-1), batch_size, "rloo").reshape(m, batch_size)
        out.append((adv[..., None] * pieces.score[idx]).mean(1) + pieces.loss[idx].mean(1))
    return torch.cat(out)
