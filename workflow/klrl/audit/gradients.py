"""The exact expected gradient of a library's own loss on the toy policy, against ∇KL.

An `AuditSetting` is one KL setting of one library: a function from a `GroupBatch` (the
tensors a trainer holds for a batch of groups of 2 sequences, the task reward 0) to the
library's own loss. Its expected gradient over batches of one group drawn from q (πθ
on-policy, the stale μ off-policy, the engine's policy e under a mismatch: ENGINE_SCALE
Gaussian noise on πθ's logits, seed ENGINE_SEED, while the trainer recomputes πθ's log-probs),
    E[∇L] = Σ_{y1, y2} q(y1) q(y2) ∇L(y1, y2),
comes from ONE call on all n² groups at once: every row's log-probs enter as
    log πθ + (w − 1)·(log πθ − sg(log πθ)),   w = n²·q(y1)·q(y2),
equal in value and with the gradient scaled by w. That is exact whenever the library's loss
on several groups is the mean of its losses on each, which its means over sequences or over
tokens are on the toy's fixed-length sequences (`tests/audit` checks it against a loop over
the groups). The expectation is an exact sum; no setting here needs Monte Carlo, and each row
says `method: exact`.

Each expected gradient (divided by β, and multiplied by T where the library averages its KL
term over tokens: every toy sequence has T tokens) is compared with the targets the registry
names (`klrl.objective.estimators`): `estimates` is the one it equals (relative difference below
MATCH_TOLERANCE), `zero`, or `other`; `rel_bias` = ‖E[ĝ] − ∇KL‖/‖∇KL‖ as in the toy table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from klrl.objective.estimators import OTHER, SEQUENCE_REVERSE_KL, TOKEN_FORWARD_KL, TOKEN_REVERSE_KL, ZERO
from klrl.toy.bias import LAG_STEPS
from klrl.toy.policy import total_variation
from klrl.toy.exact import enumerate_sequences, sequence_kl_gradient, token_kl_gradient
from klrl.toy.policy import make_problem

MODES = ("on", "off", "mismatch")
ENGINE_SCALE, ENGINE_SEED = 0.3, 5  # the engine's logits: πθ's plus this much Gaussian noise

GROUP = 2  # sequences per group: the smallest group a leave-one-out or group-normalised baseline allows
MATCH_TOLERANCE = 1e-6
COLUMNS = (
    "library",
    "version",
    "setting",
    "mode",
    "method",
    "estimates",
    "rel_bias",
    "lag",
    "tv",
    "vocab",
    "horizon",
    "seed",
)


@dataclass
class GroupBatch:
    """Every pair of toy sequences, each pair a group in consecutive rows (B = 2n² rows)."""

    seqs: torch.Tensor  # (B, T) token ids
    logp: torch.Tensor  # (B, T) log πθ per token, differentiable
    ref_logp: torch.Tensor  # (B, T) log πref
    sampling_logp: torch.Tensor  # (B, T) the trainer's old log-probs: log μ off-policy, sg(log πθ) otherwise
    engine_logp: torch.Tensor  # (B, T) the rollout engine's log-probs: sampling_logp but under a mismatch
    off_policy: bool
    mask: torch.Tensor  # (B, T) completion mask (all ones: fixed-length sequences)

    @property
    def groups(self) -> int:
        return self.seqs.shape[0] // GROUP


@dataclass(frozen=True)
class AuditSetting:
    library: str
    version: str
    name: str  # the setting in the library's own terms
    loss: Callable[[GroupBatch], torch.Tensor]  # the library's loss on the batch, β = 1
    tokens_averaged: bool  # the library averages the KL term over tokens (its gradient is multiplied by T)


def engine_theta(problem) -> torch.Tensor:
    """The rollout engine's logits under a mismatch: πθ's perturbed (as tests/toy/test_engine_correction.py's)."""
    noise = torch.randn(problem.theta.shape, generator=torch.Generator().manual_seed(ENGINE_SEED), dtype=torch.float64)
    return problem.theta + ENGINE_SCALE * noise


def expected_gradient(problem, setting: AuditSetting, mode: str) -> torch.Tensor:
    """E[∇L] over batches of one group from q, exactly (scaled by T if the KL term is a token mean)."""
    if mode not in MODES:
        raise ValueError(f"mode: {mode!r} is not one of {', '.join(MODES)}")
    theta = problem.theta.clone().requires_grad_(True)
    e = enumerate_sequences(problem, "on" if mode == "mismatch" else mode, theta)
    n, horizon = e.seqs.shape
    sampling = e.logp.detach() if e.behaviour_logp is None else e.behaviour_logp
    engine = problem.space.token_logp(engine_theta(problem), e.seqs) if mode == "mismatch" else sampling
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
    )
    loss = setting.loss(batch)
    if not loss.requires_grad:
        return torch.zeros_like(theta)
    (grad,) = torch.autograd.grad(loss, theta, allow_unused=True)
    grad = torch.zeros_like(theta) if grad is None else grad
    return grad * horizon if setting.tokens_averaged else grad


def named_targets(problem, mode: str) -> dict[str, torch.Tensor]:
    """The gradients the registry names, in `mode` (prefixes from q for the token-level ones; from πθ
    under a mismatch, whose trainer states the on-policy objective)."""
    mode = "on" if mode == "mismatch" else mode
    return {
        SEQUENCE_REVERSE_KL: sequence_kl_gradient(problem),
        TOKEN_REVERSE_KL: token_kl_gradient(problem, mode, "reverse"),
        TOKEN_FORWARD_KL: token_kl_gradient(problem, mode, "forward"),
    }


def identify(gradient: torch.Tensor, targets: dict[str, torch.Tensor]) -> str:
    """The target `gradient` equals, `zero`, or `other`."""
    scale = targets[SEQUENCE_REVERSE_KL].norm()
    if gradient.norm() <= MATCH_TOLERANCE * scale:
        return ZERO
    for name, target in targets.items():
        if (gradient - target).norm() <= MATCH_TOLERANCE * target.norm():
            return name
    return OTHER


def audit_rows(
    settings: list[AuditSetting], vocab: int = 3, horizon: int = 4, seed: int = 0, modes: tuple[str, ...] = MODES
) -> list[dict]:
    """One row per setting and mode (columns COLUMNS), on the toy problem of `klrl toy-bias`."""
    problem = make_problem(vocab, horizon, seed, lag_steps=LAG_STEPS)
    tv = total_variation(problem)
    rows = []
    for setting in settings:
        for mode in modes:
            targets = named_targets(problem, mode)
            gradient = expected_gradient(problem, setting, mode)
            true_grad = targets[SEQUENCE_REVERSE_KL]
            rows.append(
                {
                    "library": setting.library,
                    "version": setting.version,
                    "setting": setting.name,
                    "mode": mode,
                    "method": "exact",
                    "estimates": identify(gradient, targets),
                    "rel_bias": ((gradient - true_grad).norm() / true_grad.norm()).item(),
                    "lag": LAG_STEPS,
                    "tv": tv,
                    "vocab": vocab,
                    "horizon": horizon,
                    "seed": seed,
                }
            )
    return rows


def setting_rows(
    settings: list[AuditSetting], name: str, vocab: int = 3, horizon: int = 4, seed: int = 0
) -> list[dict]:
    """The rows `klrl audit --config` reports on the setting `name`: its own in every mode, every other
    setting's on-policy, and every mode of those whose on-policy gradient is the sequence's reverse KL's."""
    if name not in {setting.name for setting in settings}:
        library = settings[0].library
        raise ValueError(
            f"{name!r} is not one of {library}'s audited settings (`klrl audit --library {library}` lists them)"
        )
    on = audit_rows(settings, vocab, horizon, seed, modes=("on",))
    unbiased = {row["setting"] for row in on if row["estimates"] == SEQUENCE_REVERSE_KL} | {name}
    chosen = [setting for setting in settings if setting.name in unbiased]
    return on + audit_rows(chosen, vocab, horizon, seed, modes=("off", "mismatch"))
