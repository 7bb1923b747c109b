"""The KL penalty: estimators, placements and off-policy corrections, in one place.

Every KL term the trainer uses comes from `kl_terms`; nothing else computes one. Its
diagnostics (every estimator, clamp and weight counts) are `kl_stats`, computed once per step.

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

`describe(config)` says what each configuration's expected gradient is, on- and off-policy,
assuming sum-over-tokens aggregation and no clamp or truncation acting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch

# KLConfig and the names it validates against live in the torch-free klrl.choices; re-exported here.
from klrl.choices import CORRECTIONS, ESTIMATORS, PLACEMENTS, STANDARD_NAMES, KLConfig, check_choice  # noqa: F401


def _k1(delta: torch.Tensor) -> torch.Tensor:
    return delta


def _k2(delta: torch.Tensor) -> torch.Tensor:
    return 0.5 * delta.square()


def _k3(delta: torch.Tensor) -> torch.Tensor:
    # ρ − 1 − log ρ = expm1(−δ) + δ; near δ = 0 that cancels, so use the series there
    series = delta.square() * (0.5 - delta / 6 + delta.square() / 24)
    return torch.where(delta.abs() < 1e-2, series, torch.expm1(-delta) + delta)


_ESTIMATOR_FNS = {"k1": _k1, "k2": _k2, "k3": _k3}


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
    check_choice("token_kl", "estimator", estimator, ESTIMATORS)
    delta = at_least_fp32(logp) - at_least_fp32(ref_logp)
    clamped = torch.zeros_like(delta, dtype=torch.bool)
    if log_ratio_clamp is not None:
        clamped |= delta.detach().abs() > log_ratio_clamp
        delta = delta.clamp(-log_ratio_clamp, log_ratio_clamp)
    values = _ESTIMATOR_FNS[estimator](delta)
    if value_clamp is not None:
        clamped |= values.detach().abs() > value_clamp
        values = values.clamp(-value_clamp, value_clamp)
    return TokenKL(values, clamped)


@dataclass
class KLTerms:
    reward_penalty: torch.Tensor  # (B,) detached β·Σ_t K̂_t; subtract from the reward
    loss_tokens: torch.Tensor  # (B, T) differentiable per-token loss term, zero off the mask


def _importance_weight(log_w: torch.Tensor, truncation: float | None) -> torch.Tensor:
    """exp(log_w), capped at `truncation` in value while keeping the gradient of log_w."""
    if truncation is not None:
        log_w = log_w - (log_w.detach() - math.log(truncation)).clamp(min=0)
    return torch.exp(log_w)


def _estimate(config: KLConfig, logp: torch.Tensor, ref_logp: torch.Tensor) -> TokenKL:
    return token_kl(logp, ref_logp, config.estimator, log_ratio_clamp=config.log_ratio_clamp, value_clamp=config.value_clamp)


def correction_weight(
    config: KLConfig, logp: torch.Tensor, behaviour_logp: torch.Tensor | None, mask: torch.Tensor
) -> torch.Tensor:
    """The (B, T) importance weight of `config`'s correction on the KL term: ω_t (token-is),
    W = Π_t ω_t (sequence-is), W_≤t = Π_{s≤t} ω_s (prefix-is), truncated at `is_truncation`;
    ones without a correction. μ = πθ detached when behaviour_logp is None."""
    behaviour = logp.detach() if behaviour_logp is None else behaviour_logp
    log_ratio = (at_least_fp32(logp) - at_least_fp32(behaviour)) * mask  # log ω_t
    if config.correction == "token-is":
        return _importance_weight(log_ratio, config.is_truncation)
    if config.correction == "sequence-is":
        return _importance_weight(log_ratio.sum(-1, keepdim=True), config.is_truncation).expand_as(log_ratio)
    if config.correction == "prefix-is":
        return _importance_weight(log_ratio.cumsum(-1), config.is_truncation)
    return torch.ones_like(log_ratio)


def kl_terms(
    config: KLConfig,
    logp: torch.Tensor,
    ref_logp: torch.Tensor,
    mask: torch.Tensor,
    behaviour_logp: torch.Tensor | None = None,
) -> KLTerms:
    """The reward penalty and the loss term of `config` for one batch of (B, T) tensors.

    logp carries the gradient; ref_logp and behaviour_logp (μ's log-probs, None on-policy)
    are treated as constants. The loss term is per token: aggregate it with the policy loss.
    Diagnostics are `kl_stats`'s, computed once per step, not here.
    """
    beta = config.beta
    values = _estimate(config, logp, ref_logp).values
    mask = mask.to(values.dtype)
    values = values * mask
    weight = correction_weight(config, logp, behaviour_logp, mask)
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
    behaviour_logp: torch.Tensor | None = None,
) -> dict[str, float]:
    """Diagnostics of one batch: every estimator's sequence estimate (batch mean), how often
    `config`'s clamps and importance-weight truncation act, the weights and the mean penalty."""
    estimate = _estimate(config, logp, ref_logp)
    mask = mask.to(estimate.values.dtype)
    n_tokens = mask.sum().clamp(min=1).item()
    n_seqs = max(mask.shape[0], 1)
    stats = {}
    for name in ESTIMATORS:
        values = token_kl(logp, ref_logp, name).values
        stats[f"kl/{name}"] = ((values * mask).sum() / n_seqs).item()
    stats["kl/clamped_tokens"] = (estimate.clamped & mask.bool()).sum().item()
    stats["kl/clamped_frac"] = stats["kl/clamped_tokens"] / n_tokens
    w = correction_weight(config, logp, behaviour_logp, mask)[mask.bool()]
    stats["kl/is_weight_mean"] = w.mean().item() if w.numel() else 1.0
    stats["kl/is_weight_max"] = w.max().item() if w.numel() else 1.0
    truncation = config.is_truncation
    truncated = (w >= truncation * (1 - 1e-6)).sum().item() if truncation is not None else 0
    stats["kl/is_truncated_frac"] = truncated / n_tokens
    penalty = kl_terms(config, logp, ref_logp, mask, behaviour_logp).reward_penalty
    stats["kl/reward_penalty_mean"] = penalty.mean().item() if penalty.numel() else 0.0
    return stats


# What each configuration's expected gradient is (sum aggregation, no clamp or truncation acting).
SEQUENCE_REVERSE_KL = "sequence-reverse-kl"  # ∇ KL(πθ(·|x) ‖ πref(·|x)) over whole sequences
TOKEN_REVERSE_KL = "token-reverse-kl"  # Σ_t ∇ KL(πθ ‖ πref) at each sampled prefix, prefixes held fixed
TOKEN_FORWARD_KL = "token-forward-kl"  # Σ_t ∇ KL(πref ‖ πθ) at each sampled prefix, prefixes held fixed
ZERO = "zero"
OTHER = "other"  # biased, and not the gradient of any named divergence
NO_PENALTY = "no-penalty"


@dataclass(frozen=True)
class GradientClaim:
    target: str  # which exact gradient β⁻¹·E[ĝ] equals: one of the names above
    gradient: str  # the expected gradient as a formula

    @property
    def unbiased(self) -> bool | None:
        """Unbiased for the sequence-level reverse-KL gradient (None: no penalty at all)."""
        return None if self.target == NO_PENALTY else self.target == SEQUENCE_REVERSE_KL


_ON_POLICY = {
    ("k1", "reward"): (SEQUENCE_REVERSE_KL, "β E[(Σ_t δ_t) ∇log πθ(y)]"),
    ("k1", "loss"): (ZERO, "β E[Σ_t ∇log πθ(y_t)] = 0: the penalty is pure noise"),
    ("k1", "both"): (SEQUENCE_REVERSE_KL, "β ∇E[Σ_t K1_t]"),
    ("k2", "reward"): (OTHER, "β E[(Σ_t ½δ_t²) ∇log πθ(y)]"),
    ("k2", "loss"): (TOKEN_REVERSE_KL, "β E[Σ_t δ_t ∇log πθ(y_t)] = β Σ_t ∇KL(πθ‖πref) per prefix"),
    ("k2", "both"): (OTHER, "β ∇E[Σ_t ½δ_t²], not a KL"),
    ("k3", "reward"): (OTHER, "β E[(Σ_t K3_t) ∇log πθ(y)]"),
    ("k3", "loss"): (TOKEN_FORWARD_KL, "β E[Σ_t (1 − ρ_t) ∇log πθ(y_t)] = β Σ_t ∇KL(πref‖πθ) per prefix"),
    ("k3", "both"): (SEQUENCE_REVERSE_KL, "β ∇E[Σ_t K3_t]"),
}
_OFF_POLICY = {
    ("k1", "reward"): "β E_μ[Σ_t ω_t (Σ_s δ_s) ∇log πθ(y_t)]: token weights on a sequence penalty",
    ("k1", "loss"): "β E_μ[Σ_t ∇log πθ(y_t)] ≠ 0: lowers πθ's likelihood of μ's samples",
    ("k2", "loss"): "β E_μ[Σ_t δ_t ∇log πθ(y_t)]: tokens drawn from μ, not πθ",
    ("k3", "loss"): "β E_μ[Σ_t (1 − ρ_t) ∇log πθ(y_t)]: tokens drawn from μ, not πθ",
}
_CORRECTED = {
    "token-is": (TOKEN_REVERSE_KL, "β E_q[Σ_t ∇(ω_t K_t)] = β Σ_t ∇KL(πθ‖πref) per prefix, prefixes from q"),
    "sequence-is": (SEQUENCE_REVERSE_KL, "β E_q[W (Σ_t δ_t) ∇log πθ(y)], W = πθ(y)/q(y)"),
    "prefix-is": (SEQUENCE_REVERSE_KL, "β E_q[Σ_s W_≤s δ_s Σ_{t≤s} ∇log πθ(y_t)], W_≤s = Π_{t≤s} πθ/q"),
}


def describe(config: KLConfig) -> dict[str, GradientClaim]:
    """The expected gradient of `config`'s KL part, on-policy ('on') and off-policy ('off').

    Off-policy means rollouts from a stale μ, the policy term weighted per token by ω_t = πθ/μ.
    >>> describe(KLConfig.from_name("k3-loss", beta=0.1))["on"].target
    'token-forward-kl'
    >>> describe(KLConfig.from_name("k1-reward", beta=0.1))["off"].unbiased
    False
    """
    if config.placement == "none":
        claim = GradientClaim(NO_PENALTY, "no KL term")
        return {"on": claim, "off": claim}
    if config.correction != "none":
        claim = GradientClaim(*_CORRECTED[config.correction])
        return {"on": claim, "off": claim}
    key = (config.estimator, config.placement)
    on_target, on_gradient = _ON_POLICY[key]
    default_off = f"{on_gradient}, with y ~ μ and token weights ω_t on the score term"
    return {
        "on": GradientClaim(on_target, on_gradient),
        "off": GradientClaim(OTHER, _OFF_POLICY.get(key, default_off)),
    }


def claims_markdown(names: tuple[str, ...] = STANDARD_NAMES) -> str:
    """A Markdown table of `describe` for the named configurations (β shown as a symbol)."""
    rows = ["| config | on-policy | off-policy |", "|---|---|---|"]
    for name in names:
        config = KLConfig.from_name(name, beta=0.0 if name == "none" else 1.0)
        cells = []
        for claim in describe(config).values():
            verdict = {True: "unbiased", False: "biased", None: "—"}[claim.unbiased]
            cells.append(f"{verdict} ({claim.target}): {claim.gradient}")
        rows.append(f"| `{name}` | {cells[0]} | {cells[1]} |")
    return "\n".join(rows) + "\n"
