"""Exact gradients on the toy policy, by enumerating every sequence.

Each KL configuration's gradient estimate comes from the same code the trainer runs:
`klrl.kl.kl_terms` for the penalty and the loss term, `klrl.objectives` for the policy term
that carries a reward penalty. For one sampled sequence y the loss is
    S(y) = Σ_t −ω_t·A(y) + Σ_t loss_tokens_t(y),   A(y) = −reward_penalty(y)
(only the KL part of the objective: the task reward is 0), and its expected gradient
E_{y~q}[∇S(y)] = ∇ Σ_y q(y) S(y) with q held constant is one backward pass over all V^T
sequences. q is πθ on-policy and the stale μ off-policy. Everything is float64 and divided by β.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from klrl.kl import KLConfig, kl_terms
from klrl.objectives import policy_loss_tokens
from klrl.toy.policy import ToyProblem

MODES = ("on", "off")


@dataclass
class Enumeration:
    """Every sequence with its sampling probability and the tensors the trainer would have."""

    seqs: torch.Tensor  # (S, T)
    q: torch.Tensor  # (S,) sampling probability, constant
    logp: torch.Tensor  # (S, T) log πθ, differentiable in theta
    ref_logp: torch.Tensor
    behaviour_logp: torch.Tensor  # log q per token, constant
    mask: torch.Tensor


def enumerate_sequences(problem: ToyProblem, mode: str, theta: torch.Tensor) -> Enumeration:
    space = problem.space
    seqs = space.sequences()
    logp = space.token_logp(theta, seqs)
    if mode == "on":
        behaviour_logp = logp.detach()
    elif mode == "off":
        behaviour_logp = space.token_logp(problem.behaviour_theta, seqs)
    else:
        raise ValueError(f"mode: {mode!r} is not one of {', '.join(MODES)}")
    q = behaviour_logp.sum(-1).exp()
    ref_logp = space.token_logp(problem.ref_theta, seqs)
    return Enumeration(seqs, q, logp, ref_logp, behaviour_logp, torch.ones_like(logp))


def _theta(problem: ToyProblem) -> torch.Tensor:
    return problem.theta.clone().requires_grad_(True)


def sequence_kl_gradient(problem: ToyProblem) -> torch.Tensor:
    """∇θ KL(πθ ‖ πref) over whole sequences: ∇ Σ_y πθ(y) Σ_t δ_t(y)."""
    theta = _theta(problem)
    e = enumerate_sequences(problem, "on", theta)
    kl = (e.logp.sum(-1).exp() * (e.logp - e.ref_logp).sum(-1)).sum()
    return torch.autograd.grad(kl, theta)[0]


def token_kl_gradient(problem: ToyProblem, mode: str, direction: str) -> torch.Tensor:
    """Σ_t E_{prefix~q}[∇θ KL at that prefix], prefixes held fixed.

    direction 'reverse' is KL(πθ ‖ πref), 'forward' is KL(πref ‖ πθ); q as in `mode`.
    """
    theta = _theta(problem)
    e = enumerate_sequences(problem, mode, theta)
    log_pi = problem.space.log_dists(theta, e.seqs)
    log_ref = problem.space.log_dists(problem.ref_theta, e.seqs)
    if direction == "reverse":
        per_prefix = (log_pi.exp() * (log_pi - log_ref)).sum(-1)
    elif direction == "forward":
        per_prefix = (log_ref.exp() * (log_ref - log_pi)).sum(-1)
    else:
        raise ValueError(f"direction: {direction!r} is not 'reverse' or 'forward'")
    return torch.autograd.grad((e.q[:, None] * per_prefix).sum(), theta)[0]


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
    theta = _theta(problem)
    e = enumerate_sequences(problem, mode, theta)
    terms = kl_terms(config, e.logp, e.ref_logp, e.mask, behaviour_logp=e.behaviour_logp)
    score_terms = policy_loss_tokens(e.logp, e.behaviour_logp, torch.ones_like(e.q), e.mask).sum(-1)
    loss_terms = terms.loss_tokens.sum(-1)
    n = e.seqs.shape[0]
    score = torch.zeros(n, theta.numel(), dtype=theta.dtype)
    loss = torch.zeros_like(score)
    for i in range(n):
        score[i] = torch.autograd.grad(score_terms[i], theta, retain_graph=True)[0].reshape(-1)
        if loss_terms.requires_grad:
            loss[i] = torch.autograd.grad(loss_terms[i], theta, retain_graph=True)[0].reshape(-1)
    beta = config.beta or 1.0
    return PerSequence(e.q, terms.reward_penalty.double() / beta, score, loss / beta)


def expected_gradient(problem: ToyProblem, config: KLConfig, mode: str) -> torch.Tensor:
    """E_{y~q}[∇S(y)] / β, exactly, for one configuration; zero for 'none'."""
    theta = _theta(problem)
    e = enumerate_sequences(problem, mode, theta)
    terms = kl_terms(config, e.logp, e.ref_logp, e.mask, behaviour_logp=e.behaviour_logp)
    advantage = -terms.reward_penalty.double()
    surrogate = policy_loss_tokens(e.logp, e.behaviour_logp, advantage, e.mask).sum(-1) + terms.loss_tokens.sum(-1)
    if not surrogate.requires_grad:
        return torch.zeros_like(theta)
    (grad,) = torch.autograd.grad((e.q * surrogate).sum(), theta, allow_unused=True)
    return (torch.zeros_like(theta) if grad is None else grad) / (config.beta or 1.0)
