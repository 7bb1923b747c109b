"""The KL penalty's parts, each declared once: estimators, placements, off-policy corrections,
and the standard configurations with their colour in every figure.

An `Estimator` is its per-token value K̂_t as a function of δ_t = log πθ − log πref and what its
expected gradient is in each placement (on-policy; off-policy where the general sentence does
not say it). A `Correction` is an off-policy importance weighting with its claim.
`STANDARD_CONFIGS` names the configurations that configs, tables, the `describe` table and the figures use, each
with its colour. Everything else is derived from these: `klrl.objective.kl_config.KLConfig` validates
against them, `klrl.objective.kl.token_kl` computes `Estimator.value`, `klrl.objective.gradient_claims` states the
claims, the figures colour by `STANDARD_CONFIGS`; `check_registry` (run on import) names what a new
entry is missing. docs/extending.md, "An estimator", says what else to regenerate.

This module is imported when Snakemake builds the DAG, so it imports no torch: the value
functions use tensor methods only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

PLACEMENTS = ("none", "reward", "loss", "both")
PENALTY_PLACEMENTS = PLACEMENTS[1:]

# The exact gradient β⁻¹·E[ĝ] of a configuration equals one of these (sum aggregation, no clamp acting).
SEQUENCE_REVERSE_KL = "sequence-reverse-kl"  # ∇ KL(πθ(·|x) ‖ πref(·|x)) over whole sequences
TOKEN_REVERSE_KL = "token-reverse-kl"  # Σ_t ∇ KL(πθ ‖ πref) at each sampled prefix, prefixes held fixed
TOKEN_FORWARD_KL = "token-forward-kl"  # Σ_t ∇ KL(πref ‖ πθ) at each sampled prefix, prefixes held fixed
ZERO = "zero"
OTHER = "other"  # biased, and not the gradient of any named divergence
NO_PENALTY = "no-penalty"
TARGETS = (SEQUENCE_REVERSE_KL, TOKEN_REVERSE_KL, TOKEN_FORWARD_KL, ZERO, OTHER, NO_PENALTY)


@dataclass(frozen=True)
class GradientClaim:
    target: str  # one of TARGETS
    gradient: str  # the expected gradient as a formula

    @property
    def unbiased(self) -> bool | None:
        """Unbiased for the sequence-level reverse-KL gradient (None: no penalty at all)."""
        return None if self.target == NO_PENALTY else self.target == SEQUENCE_REVERSE_KL


@dataclass(frozen=True)
class Estimator:
    name: str
    formula: str  # K̂_t in the notation of docs/paper.md
    value: Callable  # δ_t (a tensor) → K̂_t, elementwise
    unbiased_value: bool  # E_{y_t~πθ}[K̂_t] = KL(πθ‖πref) at each prefix (what the token-is correction weights)
    on_policy: Mapping[str, GradientClaim]  # every penalty placement → its on-policy claim
    # placement → the off-policy gradient where "<on-policy gradient>, with y ~ μ and token
    # weights ω_t on the score term" does not say it (off-policy every placement is biased)
    off_policy: Mapping[str, str] = field(default_factory=dict)


def _k1(delta):
    return delta


def _k2(delta):
    return 0.5 * delta.square()


def _k3(delta):
    # ρ − 1 − log ρ = expm1(−δ) + δ; near δ = 0 that cancels, so use the series there
    series = delta.square() * (0.5 - delta / 6 + delta.square() / 24)
    return series.where(delta.abs() < 1e-2, (-delta).expm1() + delta)


ESTIMATORS = {
    estimator.name: estimator
    for estimator in (
        Estimator(
            "k1",
            "K1_t = δ_t",
            _k1,
            unbiased_value=True,
            on_policy={
                "reward": GradientClaim(SEQUENCE_REVERSE_KL, "β E[(Σ_t δ_t) ∇log πθ(y)]"),
                "loss": GradientClaim(ZERO, "β E[Σ_t ∇log πθ(y_t)] = 0: the penalty is pure noise"),
                "both": GradientClaim(SEQUENCE_REVERSE_KL, "β ∇E[Σ_t K1_t]"),
            },
            off_policy={
                "reward": "β E_μ[Σ_t ω_t (Σ_s δ_s) ∇log πθ(y_t)]: token weights on a sequence penalty",
                "loss": "β E_μ[Σ_t ∇log πθ(y_t)] ≠ 0: lowers πθ's likelihood of μ's samples",
            },
        ),
        Estimator(
            "k2",
            "K2_t = ½δ_t²",
            _k2,
            unbiased_value=False,
            on_policy={
                "reward": GradientClaim(OTHER, "β E[(Σ_t ½δ_t²) ∇log πθ(y)]"),
                "loss": GradientClaim(TOKEN_REVERSE_KL, "β E[Σ_t δ_t ∇log πθ(y_t)] = β Σ_t ∇KL(πθ‖πref) per prefix"),
                "both": GradientClaim(OTHER, "β ∇E[Σ_t ½δ_t²], not a KL"),
            },
            off_policy={"loss": "β E_μ[Σ_t δ_t ∇log πθ(y_t)]: tokens drawn from μ, not πθ"},
        ),
        Estimator(
            "k3",
            "K3_t = ρ_t − 1 + δ_t, ρ_t = exp(−δ_t)",
            _k3,
            unbiased_value=True,
            on_policy={
                "reward": GradientClaim(OTHER, "β E[(Σ_t K3_t) ∇log πθ(y)]"),
                "loss": GradientClaim(
                    TOKEN_FORWARD_KL, "β E[Σ_t (1 − ρ_t) ∇log πθ(y_t)] = β Σ_t ∇KL(πref‖πθ) per prefix"
                ),
                "both": GradientClaim(SEQUENCE_REVERSE_KL, "β ∇E[Σ_t K3_t]"),
            },
            off_policy={"loss": "β E_μ[Σ_t (1 − ρ_t) ∇log πθ(y_t)]: tokens drawn from μ, not πθ"},
        ),
    )
}


@dataclass(frozen=True)
class Correction:
    name: str  # the KLConfig.correction value
    suffix: str  # its part of a configuration's standard name (k1-loss-tokis)
    claim: GradientClaim  # on- and off-policy alike (q: the sampling policy)


CORRECTIONS = {
    correction.name: correction
    for correction in (
        Correction(
            "token-is",
            "tokis",
            GradientClaim(TOKEN_REVERSE_KL, "β E_q[Σ_t ∇(ω_t K_t)] = β Σ_t ∇KL(πθ‖πref) per prefix, prefixes from q"),
        ),
        Correction(
            "sequence-is", "seqis", GradientClaim(SEQUENCE_REVERSE_KL, "β E_q[W (Σ_t δ_t) ∇log πθ(y)], W = πθ(y)/q(y)")
        ),
        Correction(
            "prefix-is",
            "prefixis",
            GradientClaim(SEQUENCE_REVERSE_KL, "β E_q[Σ_s W_≤s δ_s Σ_{t≤s} ∇log πθ(y_t)], W_≤s = Π_{t≤s} πθ/q"),
        ),
    )
}

# The configurations every table, config file and CLI names (the paper's, then the corrections),
# each with its colour in every figure: estimator families share a hue family (K1 blues and
# purples, K3 greens and oranges), no KL is grey.
STANDARD_CONFIGS = {
    "none": "#6b6b6b",
    "k1-reward": "#1f5fbf",
    "k1-loss": "#d62728",
    "k1-both": "#17becf",
    "k2-loss": "#9467bd",
    "k3-reward": "#ff7f0e",
    "k3-loss": "#2ca02c",
    "k3-both": "#8c8c00",
    "k1-loss-tokis": "#e377c2",
    "k3-loss-tokis": "#8c564b",
    "k1-reward-seqis": "#7fa7e0",
    "k1-reward-prefixis": "#1b1b6b",
}


class RegistryError(ValueError):
    """An entry of this registry that is incomplete or contradicts another: names the entry and what to add."""


def check_registry() -> None:
    """Every estimator has a claim for each penalty placement and only for those; every standard
    name is `none` or <estimator>-<placement>[-<correction suffix>] of declared parts; no two
    configurations share a colour."""
    for estimator in ESTIMATORS.values():
        missing = [placement for placement in PENALTY_PLACEMENTS if placement not in estimator.on_policy]
        if missing:
            raise RegistryError(
                f"klrl.objective.estimators: estimator {estimator.name!r} has no on-policy claim for placement {missing[0]!r}"
            )
        unknown = sorted((set(estimator.on_policy) | set(estimator.off_policy)) - set(PENALTY_PLACEMENTS))
        if unknown:
            raise RegistryError(
                f"klrl.objective.estimators: estimator {estimator.name!r} claims placement {unknown[0]!r}, not one of {', '.join(PENALTY_PLACEMENTS)}"
            )
        bad = [claim.target for claim in estimator.on_policy.values() if claim.target not in TARGETS]
        if bad:
            raise RegistryError(
                f"klrl.objective.estimators: estimator {estimator.name!r} claims target {bad[0]!r}, not one of {', '.join(TARGETS)}"
            )
    suffixes = {correction.suffix for correction in CORRECTIONS.values()}
    for name in STANDARD_CONFIGS:
        parts = name.split("-")
        if name != "none" and not (
            len(parts) in (2, 3)
            and parts[0] in ESTIMATORS
            and parts[1] in PENALTY_PLACEMENTS
            and (len(parts) == 2 or parts[2] in suffixes)
        ):
            raise RegistryError(
                f"klrl.objective.estimators: standard configuration {name!r} is not <estimator>-<placement>[-<correction>] "
                f"of the estimators {', '.join(ESTIMATORS)}, placements {', '.join(PENALTY_PLACEMENTS)} and corrections {', '.join(sorted(suffixes))}"
            )
    colours: dict[str, str] = {}
    for name, colour in STANDARD_CONFIGS.items():
        if colour in colours:
            raise RegistryError(
                f"klrl.objective.estimators: {name!r} and {colours[colour]!r} share the colour {colour}; give {name!r} its own"
            )
        colours[colour] = name


check_registry()
