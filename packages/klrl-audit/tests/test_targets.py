"""The targets and the expectation against closed forms on a one-step toy (a single softmax p = softmax(θ),
r = softmax(θref)): ∇θ KL(p ‖ r) = p ⊙ (δ − KL(p ‖ r)) with δ = log p − log r, ∇θ KL(r ‖ p) = p − r,
and E_{y~p}[c(y) ∇log p(y)] = p ⊙ (c − E_p[c]) for a fixed c."""

import pytest
import torch

from klrl_audit import expected_gradient, make_problem
from klrl_audit.targets import TOKEN_FORWARD_KL, identify, named_targets, sequence_kl_gradient, token_kl_gradient


@pytest.fixture(scope="module")
def one_step():
    return make_problem(vocab=4, horizon=1, seed=3)


def _softmaxes(problem):
    return problem.theta[0].softmax(-1), problem.ref_theta[0].softmax(-1)


def test_the_reverse_kl_targets_are_the_closed_form(one_step):
    p, r = _softmaxes(one_step)
    delta = p.log() - r.log()
    closed = p * (delta - (p * delta).sum())
    torch.testing.assert_close(sequence_kl_gradient(one_step)[0], closed, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(token_kl_gradient(one_step, "on", "reverse")[0], closed, rtol=1e-12, atol=1e-14)


def test_the_forward_kl_target_is_the_closed_form(one_step):
    p, r = _softmaxes(one_step)
    torch.testing.assert_close(token_kl_gradient(one_step, "on", "forward")[0], p - r, rtol=1e-12, atol=1e-14)


def test_the_expectation_of_a_score_function_is_the_closed_form(one_step):
    """A loss −c(y)·log πθ(y) per sequence, averaged: its exact expected gradient is −p ⊙ (c − E_p[c])."""
    c = torch.tensor([0.3, -1.2, 2.0, 0.5], dtype=torch.float64)
    p, _ = _softmaxes(one_step)

    def loss(batch):
        return -(c[batch.seqs[:, 0]] * batch.logp[:, 0]).mean()

    closed = -p * (c - (p * c).sum())
    torch.testing.assert_close(expected_gradient(loss, "on", one_step)[0], closed, rtol=1e-12, atol=1e-14)


def test_the_expectation_off_policy_samples_from_the_stale_policy(one_step):
    mu = one_step.behaviour_theta[0].softmax(-1)
    p, _ = _softmaxes(one_step)

    def loss(batch):
        return -batch.logp[:, 0].mean()

    # E_{y~μ}[∇log p(y)] = μ − p
    torch.testing.assert_close(expected_gradient(loss, "off", one_step)[0], -(mu - p), rtol=1e-12, atol=1e-14)


def test_a_gradient_is_identified_within_the_tolerance_only():
    problem = make_problem(vocab=2, horizon=3, seed=1)
    targets = named_targets(problem, "on")
    forward = targets[TOKEN_FORWARD_KL]
    assert identify(forward * (1 + 1e-8), targets) == TOKEN_FORWARD_KL
    assert identify(forward * (1 + 1e-4), targets) == "other"
    assert identify(forward * 0, targets) == "zero"
