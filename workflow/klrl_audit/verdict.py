"""Which named target a loss function's expected KL gradient follows, and the assertion that it is the one stated.

`audit` returns the exact expected gradient (`klrl_audit.expectation`), every target's gradient
(`klrl_audit.targets`), the target it equals and its bias: ‖E[ĝ] − ∇KL‖/‖∇KL‖ against the
sequence's reverse KL, the objective a KL-regularised RL trainer states. `assert_kl_gradient`
fails with a message naming the target the function follows instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from klrl_audit.expectation import POLICIES, GroupBatch, expected_gradient
from klrl_audit.targets import LABELS, OTHER, SEQUENCE_REVERSE_KL, TARGETS, ZERO, identify, named_targets
from klrl_audit.toy import ToyProblem, make_problem

POLICY_WORDS = {"on": "on-policy", "off": "off-policy", "mismatch": "under an engine mismatch"}


@dataclass(frozen=True)
class Verdict:
    """The exact expected gradient of one loss function in one policy mode, against each named target."""

    policy: str  # on, off or mismatch
    gradient: torch.Tensor  # E[∇L] on the toy's parameter table
    targets: dict[str, torch.Tensor]  # each named target's gradient, `zero`'s included
    follows: str  # the target the gradient equals, or `other`
    bias: float  # ‖E[ĝ] − ∇KL‖/‖∇KL‖ against the sequence's reverse KL

    def distance(self, target: str) -> float:
        """‖E[ĝ] − target‖/‖target‖ (for `zero`, relative to the sequence reverse KL's norm)."""
        scale = self.targets[SEQUENCE_REVERSE_KL if target == ZERO else target].norm()
        return ((self.gradient - self.targets[target]).norm() / scale).item()

    def closest(self) -> str:
        """The named target nearest the gradient."""
        return min(TARGETS, key=self.distance)


def _check(policy: str, target: str | None = None) -> None:
    if policy not in POLICIES:
        raise ValueError(f"policy: {policy!r} is not one of {', '.join(POLICIES)}")
    if target is not None and target not in TARGETS:
        raise ValueError(f"target: {target!r} is not one of {', '.join(TARGETS)}")


def audit(
    loss: Callable[[GroupBatch], torch.Tensor],
    policy: str = "on",
    problem: ToyProblem | None = None,
    tokens_averaged: bool = False,
) -> Verdict:
    """The verdict on `loss` (β = 1) sampled as `policy` says, on `problem` (default: `make_problem()`).

    `tokens_averaged`: the loss averages its KL term over tokens, so its gradient is compared
    multiplied by T. Under an engine mismatch the targets are the on-policy ones (the trainer states
    the on-policy objective).
    """
    _check(policy)
    problem = make_problem() if problem is None else problem
    gradient = expected_gradient(loss, policy, problem, tokens_averaged)
    targets = named_targets(problem, "off" if policy == "off" else "on")
    follows = identify(gradient, targets)
    targets[ZERO] = torch.zeros_like(gradient)
    reverse = targets[SEQUENCE_REVERSE_KL]
    bias = ((gradient - reverse).norm() / reverse.norm()).item()
    return Verdict(policy, gradient, targets, follows, bias)


def assert_kl_gradient(
    loss: Callable[[GroupBatch], torch.Tensor],
    target: str = SEQUENCE_REVERSE_KL,
    policy: str = "on",
    problem: ToyProblem | None = None,
    tokens_averaged: bool = False,
) -> Verdict:
    """The verdict, if `loss`'s exact expected gradient is `target`'s; else AssertionError naming the one it follows."""
    _check(policy, target)
    verdict = audit(loss, policy, problem, tokens_averaged)
    if verdict.follows == target:
        return verdict
    if verdict.follows == OTHER:
        found = f"none of the named targets (closest: the {LABELS[verdict.closest()]}, at {verdict.distance(verdict.closest()):.3g})"
    else:
        found = f"the {LABELS[verdict.follows]}"
    raise AssertionError(
        f"the expected KL gradient {POLICY_WORDS[policy]} follows {found}, not the {LABELS[target]} "
        f"(relative distance {verdict.distance(target):.3g}; bias against the sequence reverse KL {verdict.bias:.3g})"
    )
