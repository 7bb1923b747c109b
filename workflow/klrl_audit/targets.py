"""The named targets a KL gradient is held against, exactly on the toy policy, and which one a gradient is.

Every sequence of the toy is enumerated with its sampling probability q (πθ on-policy, the stale μ
off-policy), so each target is an exact sum:
    sequence-reverse-kl  ∇θ KL(πθ ‖ πref) over whole sequences: ∇ Σ_y πθ(y) Σ_t δ_t(y);
    token-reverse-kl     Σ_t E_{prefix~q}[∇θ KL(πθ ‖ πref) at that prefix], prefixes held fixed;
    token-forward-kl     Σ_t E_{prefix~q}[∇θ KL(πref ‖ πθ) at that prefix], prefixes held fixed;
    zero                 no gradient at all.
A gradient none of them equals is `other`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from klrl_audit.toy import ToyProblem

SEQUENCE_REVERSE_KL = "sequence-reverse-kl"
TOKEN_REVERSE_KL = "token-reverse-kl"
TOKEN_FORWARD_KL = "token-forward-kl"
ZERO = "zero"
OTHER = "other"
# each target's name in a sentence
TARGETS = {
    SEQUENCE_REVERSE_KL: "sequence reverse KL",
    TOKEN_REVERSE_KL: "per-token reverse KL",
    TOKEN_FORWARD_KL: "per-token forward KL",
    ZERO: "zero gradient",
}
LABELS = TARGETS | {OTHER: "none of the named targets"}
MATCH_TOLERANCE = 1e-6  # the relative difference below which a gradient equals a target
SAMPLING = ("on", "off")  # where the sequences come from: πθ, or the stale μ


@dataclass
class Enumeration:
    """Every sequence with its sampling probability and the tensors a trainer would have."""

    seqs: torch.Tensor  # (S, T)
    q: torch.Tensor  # (S,) sampling probability, constant
    logp: torch.Tensor  # (S, T) log πθ, differentiable in theta
    ref_logp: torch.Tensor
    behaviour_logp: torch.Tensor | None  # log μ per token off-policy; None on-policy (q = πθ)
    mask: torch.Tensor  # (S, T) 1 up to and including EOS


def enumerate_sequences(problem: ToyProblem, mode: str, theta: torch.Tensor) -> Enumeration:
    """Every sequence of the toy, sampled from πθ (`mode` 'on') or from μ ('off')."""
    space = problem.space
    seqs = space.sequences()
    mask = space.mask(seqs)
    logp = space.token_logp(theta, seqs)
    if mode == "on":
        behaviour_logp, sampling_logp = None, logp.detach()
    elif mode == "off":
        behaviour_logp = sampling_logp = space.token_logp(problem.behaviour_theta, seqs)
    else:
        raise ValueError(f"mode: {mode!r} is not one of {', '.join(SAMPLING)}")
    q = (sampling_logp * mask).sum(-1).exp()
    ref_logp = space.token_logp(problem.ref_theta, seqs)
    return Enumeration(seqs, q, logp, ref_logp, behaviour_logp, mask)


def _theta(problem: ToyProblem) -> torch.Tensor:
    return problem.theta.clone().requires_grad_(True)


def sequence_kl_gradient(problem: ToyProblem) -> torch.Tensor:
    """∇θ KL(πθ ‖ πref) over whole sequences: ∇ Σ_y πθ(y) Σ_t δ_t(y)."""
    theta = _theta(problem)
    e = enumerate_sequences(problem, "on", theta)
    kl = (e.logp * e.mask).sum(-1).exp() * ((e.logp - e.ref_logp) * e.mask).sum(-1)
    return torch.autograd.grad(kl.sum(), theta)[0]


def token_kl_gradient(problem: ToyProblem, mode: str, direction: str) -> torch.Tensor:
    """Σ_t E_{prefix~q}[∇θ KL at that prefix], prefixes held fixed, over the unmasked steps.

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
    return torch.autograd.grad((e.q[:, None] * per_prefix * e.mask).sum(), theta)[0]


def named_targets(problem: ToyProblem, mode: str) -> dict[str, torch.Tensor]:
    """The non-zero targets' gradients, prefixes from q in `mode` ('on' or 'off')."""
    return {
        SEQUENCE_REVERSE_KL: sequence_kl_gradient(problem),
        TOKEN_REVERSE_KL: token_kl_gradient(problem, mode, "reverse"),
        TOKEN_FORWARD_KL: token_kl_gradient(problem, mode, "forward"),
    }


def relative_distance(gradient: torch.Tensor, target: torch.Tensor) -> float:
    """‖gradient − target‖ / ‖target‖."""
    return ((gradient - target).norm() / target.norm()).item()


def identify(gradient: torch.Tensor, targets: dict[str, torch.Tensor]) -> str:
    """The target `gradient` equals (relative difference below MATCH_TOLERANCE), `zero`, or `other`."""
    if gradient.norm() <= MATCH_TOLERANCE * targets[SEQUENCE_REVERSE_KL].norm():
        return ZERO
    for name, target in targets.items():
        if relative_distance(gradient, target) <= MATCH_TOLERANCE:
            return name
    return OTHER
