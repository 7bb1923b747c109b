"""The gradient table of docs/paper.md, checked exactly by enumerating every sequence of a tabular policy."""

import pytest
import torch

from klrl.kl import (
    SEQUENCE_REVERSE_KL,
    STANDARD_NAMES,
    TOKEN_FORWARD_KL,
    TOKEN_REVERSE_KL,
    ZERO,
    KLConfig,
    describe,
)
from klrl.toy.bias import batch_estimates
from klrl.toy.exact import (
    MODES,
    enumerate_sequences,
    expected_gradient,
    per_sequence,
    sequence_kl_gradient,
    token_kl_gradient,
)
from klrl.toy.policy import make_problem

CONFIGS = [name for name in STANDARD_NAMES if name != "none"]


@pytest.fixture(scope="module")
def problem():
    return make_problem(vocab=3, horizon=4, seed=0)


@pytest.fixture(scope="module")
def true_grad(problem):
    return sequence_kl_gradient(problem)


def _rel(a, b):
    return ((a - b).norm() / b.norm()).item()


def test_enumeration_is_a_distribution(problem):
    for mode in MODES:
        e = enumerate_sequences(problem, mode, problem.theta)
        assert e.seqs.shape == (81, 4)
        assert len({tuple(s) for s in e.seqs.tolist()}) == 81
        assert e.q.sum().item() == pytest.approx(1.0, abs=1e-12)
    # μ really differs from πθ, and not absurdly so
    on, off = enumerate_sequences(problem, "on", problem.theta), enumerate_sequences(problem, "off", problem.theta)
    tv = 0.5 * (on.q - off.q).abs().sum().item()
    assert 0.05 < tv < 0.8


def test_sequence_kl_gradient_matches_finite_differences(problem, true_grad):
    def kl(theta):
        e = enumerate_sequences(problem, "on", theta)
        return (e.q * (e.logp - e.ref_logp).sum(-1)).sum()

    eps = 1e-6
    for index in [(0, 0), (3, 2), (20, 1), (39, 0)]:
        plus, minus = problem.theta.clone(), problem.theta.clone()
        plus[index] += eps
        minus[index] -= eps
        numeric = (kl(plus) - kl(minus)) / (2 * eps)
        assert numeric.item() == pytest.approx(true_grad[index].item(), rel=1e-6, abs=1e-9)


def test_the_three_targets_differ(problem, true_grad):
    reverse = token_kl_gradient(problem, "on", "reverse")
    forward = token_kl_gradient(problem, "on", "forward")
    assert _rel(reverse, true_grad) > 0.05
    assert _rel(forward, true_grad) > 0.05
    assert _rel(forward, reverse) > 0.05


def _reference(problem, true_grad, target, mode):
    if target == SEQUENCE_REVERSE_KL:
        return true_grad
    if target == TOKEN_REVERSE_KL:
        return token_kl_gradient(problem, mode, "reverse")
    if target == TOKEN_FORWARD_KL:
        return token_kl_gradient(problem, mode, "forward")
    if target == ZERO:
        return torch.zeros_like(true_grad)
    return None


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", CONFIGS)
def test_expected_gradient_is_what_describe_says(problem, true_grad, name, mode):
    config = KLConfig.from_name(name, beta=0.1)
    claim = describe(config)[mode]
    exact = expected_gradient(problem, config, mode)
    reference = _reference(problem, true_grad, claim.target, mode)
    if reference is not None:
        assert torch.allclose(exact, reference, rtol=1e-9, atol=1e-12), claim
    else:  # "other": none of the named gradients
        for target in (SEQUENCE_REVERSE_KL, TOKEN_REVERSE_KL, TOKEN_FORWARD_KL):
            assert _rel(exact, _reference(problem, true_grad, target, mode)) > 0.02
    if claim.unbiased:
        assert _rel(exact, true_grad) < 1e-9
    else:
        assert _rel(exact, true_grad) > 0.02


def test_paper_table_on_policy(problem, true_grad):
    grad = {name: expected_gradient(problem, KLConfig.from_name(name, beta=0.1), "on") for name in CONFIGS}
    for name in ("k1-reward", "k1-both", "k3-both"):
        assert torch.allclose(grad[name], true_grad, rtol=1e-9, atol=1e-12)
    assert grad["k1-loss"].abs().max().item() < 1e-12
    assert torch.allclose(grad["k3-loss"], token_kl_gradient(problem, "on", "forward"), rtol=1e-9, atol=1e-12)
    assert torch.allclose(grad["k2-loss"], token_kl_gradient(problem, "on", "reverse"), rtol=1e-9, atol=1e-12)
    assert _rel(grad["k3-reward"], true_grad) > 0.1


def test_paper_configs_are_biased_off_policy_and_the_corrections_are_not(problem, true_grad):
    for name in ("k1-reward", "k1-loss", "k3-reward", "k3-loss"):
        assert _rel(expected_gradient(problem, KLConfig.from_name(name, beta=0.1), "off"), true_grad) > 0.02
    for name in ("k1-reward-seqis", "k1-reward-prefixis"):
        exact = expected_gradient(problem, KLConfig.from_name(name, beta=0.1), "off")
        assert torch.allclose(exact, true_grad, rtol=1e-9, atol=1e-12)
    reverse_at_mu = token_kl_gradient(problem, "off", "reverse")
    for name in ("k1-loss-tokis", "k3-loss-tokis"):
        exact = expected_gradient(problem, KLConfig.from_name(name, beta=0.1), "off")
        assert torch.allclose(exact, reverse_at_mu, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["k1-reward", "k1-loss", "k3-loss", "k3-both", "k1-reward-prefixis", "k3-loss-tokis"])
def test_monte_carlo_converges_to_the_exact_expectation(problem, name, mode):
    config = KLConfig.from_name(name, beta=0.1)
    exact = expected_gradient(problem, config, mode).reshape(-1)
    estimates = batch_estimates(per_sequence(problem, config, mode), 4000, 8, torch.Generator().manual_seed(1))
    variance = (estimates - exact).square().sum(-1).mean()
    error = (estimates.mean(0) - exact).norm()
    # E‖mean − E ĝ‖² = variance / n_batches: the error is a few standard errors at most
    assert error <= 4 * (variance / 4000).sqrt()
    assert variance > 0


def test_prefix_weighting_has_lower_variance_than_sequence_weighting(problem):
    variances = {}
    for name in ("k1-reward-seqis", "k1-reward-prefixis"):
        config = KLConfig.from_name(name, beta=0.1)
        exact = expected_gradient(problem, config, "off").reshape(-1)
        estimates = batch_estimates(per_sequence(problem, config, "off"), 4000, 16, torch.Generator().manual_seed(2))
        variances[name] = (estimates - exact).square().sum(-1).mean().item()
    assert variances["k1-reward-prefixis"] < variances["k1-reward-seqis"]
