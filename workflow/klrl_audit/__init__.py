"""klrl-audit: the exact expected gradient of an RL library's KL term or loss on an enumerable toy policy,
against the gradients it may follow (sequence reverse KL, per-token reverse or forward KL, zero).

Public API (versioned by __version__; packages/klrl-audit/README.md):
    assert_kl_gradient(loss, target="sequence-reverse-kl", policy="on")  the verdict, or AssertionError
    audit(loss, policy="on")             the Verdict: gradient, each target's, the one it follows, bias
    expected_gradient(loss, policy, problem, tokens_averaged=False)  E[∇ loss], exactly
    GroupBatch                           what `loss` receives: per-token log-probs, masks, rewards
    TARGETS, POLICIES, GROUP             target names, policy modes, sequences per group
    make_problem, ToyProblem             the toy policy (πθ, πref, a stale μ)
The pytest plugin (klrl_audit.pytest_plugin) gives the fixtures assert_kl_gradient and kl_audit.
"""

from klrl_audit.expectation import GROUP, POLICIES, GroupBatch, expected_gradient
from klrl_audit.targets import TARGETS
from klrl_audit.toy import ToyProblem, make_problem
from klrl_audit.verdict import Verdict, assert_kl_gradient, audit

__version__ = "0.1.0"
__all__ = [
    "GROUP",
    "POLICIES",
    "TARGETS",
    "GroupBatch",
    "ToyProblem",
    "Verdict",
    "assert_kl_gradient",
    "audit",
    "expected_gradient",
    "make_problem",
]
