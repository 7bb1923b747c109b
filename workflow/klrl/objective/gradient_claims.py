"""What each KL configuration's expected gradient is, on- and off-policy, from the claims
`klrl.objective.estimators` declares (an estimator's per placement, a correction's), for
sum-over-tokens aggregation with no clamp or truncation acting; `tests/toy/test_exact.py` holds
each one exactly. `klrl describe` prints them; the grid's check and the toy table read them."""

from __future__ import annotations

from klrl.objective import estimators
from klrl.objective.estimators import NO_PENALTY, OTHER, GradientClaim
from klrl.objective.kl_config import KLConfig


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
        claim = estimators.CORRECTIONS[config.correction].claim
        return {"on": claim, "off": claim}
    estimator = estimators.ESTIMATORS[config.estimator]
    on = estimator.on_policy[config.placement]
    off = estimator.off_policy.get(
        config.placement, f"{on.gradient}, with y ~ μ and token weights ω_t on the score term"
    )
    return {"on": on, "off": GradientClaim(OTHER, off)}


def claims_markdown(names=None) -> str:
    """A Markdown table of `describe` for the named configurations (default: the standard ones;
    β shown as a symbol)."""
    rows = ["| config | on-policy | off-policy |", "|---|---|---|"]
    for name in estimators.STANDARD_CONFIGS if names is None else names:
        config = KLConfig.from_name(name, beta=0.0 if name == "none" else 1.0)
        cells = []
        for claim in describe(config).values():
            verdict = {True: "unbiased", False: "biased", None: "—"}[claim.unbiased]
            cells.append(f"{verdict} ({claim.target}): {claim.gradient}")
        rows.append(f"| `{name}` | {cells[0]} | {cells[1]} |")
    return "\n".join(rows) + "\n"
