"""The gradient table of docs/paper.md, checked exactly by enumerating every sequence of a tabular policy,
through the trainer's own loss (`klrl.objective.loss.batch_loss`: penalty, RLOO advantages, policy term,
KL loss term, aggregation, masks, clamps), on fixed-length sequences and on sequences that end
at an EOS and are padded after it."""

import pytest
import torch

from klrl.objective.kl_config import KLConfig
from klrl.objective.gradient_claims import describe
from klrl.objective.estimators import SEQUENCE_REVERSE_KL, STANDARD_CONFIGS, TOKEN_FORWARD_KL, TOKEN_REVERSE_KL, ZERO
from klrl.objective.kl import importance_log_ratio, kl_stats
from klrl.objective.loss import LossConfig
from klrl.toy.exact import batch_estimates
from klrl.toy.exact import expected_gradient, per_sequence, toy_loss_config
from klrl_audit.targets import SAMPLING
from klrl_audit.targets import enumerate_sequences, sequence_kl_gradient, token_kl_gradient
from klrl_audit.toy import make_problem

CONFIGS = [name for name in STANDARD_CONFIGS if name != "none"]


PROBLEMS = {"fixed": {"vocab": 3, "horizon": 4}, "eos": {"vocab": 3, "horizon": 4, "eos": 2}}
# clamps at values that do not act on these problems (asserted in `_clamped_config`): the
# paper's ratio clamp 8; the KL and weight clamps above the largest |δ|, K̂ and W
RATIO_CLAMP, LOG_RATIO_CLAMP, VALUE_CLAMP, IS_TRUNCATION = 8.0, 5.0, 60.0, 20.0


@pytest.fixture(scope="module", params=list(PROBLEMS))
def problem(request):
    return make_problem(seed=0, **PROBLEMS[request.param])


@pytest.fixture(scope="module")
def true_grad(problem):
    return sequence_kl_gradient(problem)


def _rel(a, b):
    return ((a - b).norm() / b.norm()).item()


def test_enumeration_is_a_distribution(problem):
    # fixed length: all 3^4 sequences; with EOS (token 2): 1 + 2 + 4 + 8 ending in EOS, 16 without
    n = 81 if problem.space.eos is None else 31
    for mode in SAMPLING:
        e = enumerate_sequences(problem, mode, problem.theta)
        assert e.seqs.shape == (n, 4)
        assert len({tuple(s) for s in e.seqs.tolist()}) == n
        assert e.q.sum().item() == pytest.approx(1.0, abs=1e-12)
    if problem.space.eos is not None:  # padding: EOS-filled and masked after the first EOS
        lengths = e.mask.sum(-1)
        assert sorted(lengths.tolist()) == [1.0] + [2.0] * 2 + [3.0] * 4 + [4.0] * 24
        assert all((row[int(n) - 1 :] == 2).all() for row, n in zip(e.seqs, lengths) if n < 4)
    # μ really differs from πθ, and not absurdly so
    on, off = enumerate_sequences(problem, "on", problem.theta), enumerate_sequences(problem, "off", problem.theta)
    tv = 0.5 * (on.q - off.q).abs().sum().item()
    assert 0.05 < tv < 0.8


def test_sequence_kl_gradient_matches_finite_differences(problem, true_grad):
    def kl(theta):
        e = enumerate_sequences(problem, "on", theta)
        return (e.q * ((e.logp - e.ref_logp) * e.mask).sum(-1)).sum()

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


def _clamped_config(problem, name, mode) -> LossConfig:
    """`name` with every clamp of the trainer set, each shown not to act on `problem`."""
    truncation = {"is_truncation": IS_TRUNCATION} if "is" in name.split("-")[-1] else {}
    kl = KLConfig.from_name(name, beta=0.1, log_ratio_clamp=LOG_RATIO_CLAMP, value_clamp=VALUE_CLAMP, **truncation)
    e = enumerate_sequences(problem, mode, problem.theta)
    log_ratio = None if e.behaviour_logp is None else importance_log_ratio(e.logp, e.behaviour_logp)
    stats = kl_stats(kl, e.logp, e.ref_logp, e.mask, log_ratio)
    assert stats["kl/clamped_tokens"] == 0 and stats["kl/is_truncated_frac"] == 0
    assert stats["kl/is_weight_max"] < IS_TRUNCATION
    if e.behaviour_logp is not None:
        assert torch.exp(e.logp - e.behaviour_logp)[e.mask.bool()].max() < RATIO_CLAMP
    return toy_loss_config(kl, ratio_clamp=RATIO_CLAMP)


@pytest.mark.parametrize("mode", SAMPLING)
@pytest.mark.parametrize("name", CONFIGS)
def test_expected_gradient_is_what_describe_says(problem, true_grad, name, mode):
    config = _clamped_config(problem, name, mode)
    claim = describe(config.kl)[mode]
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


@pytest.mark.parametrize("mode", SAMPLING)
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


def test_the_padding_matters_so_the_eos_proofs_test_the_masks():
    """With EOS, the log-probs after it are real functions of θ: the sequence-KL gradient with
    the padding counted as tokens is far from the true one, so a loss that forgot the mask
    anywhere would fail the claims on the EOS problem above."""
    problem = make_problem(seed=0, **PROBLEMS["eos"])
    theta = problem.theta.clone().requires_grad_(True)
    e = enumerate_sequences(problem, "on", theta)
    assert (e.mask == 0).any()
    padded_kl = (e.logp.sum(-1).exp() * (e.logp - e.ref_logp).sum(-1)).sum()
    (padded,) = torch.autograd.grad(padded_kl, theta)
    assert _rel(padded, sequence_kl_gradient(problem)) > 0.1


@pytest.mark.parametrize("mode", SAMPLING)
def test_group_mean_scales_the_reward_placement_by_g_minus_one_over_g(problem, mode):
    """Dr. GRPO's baseline includes the sample itself: A = (G−1)/G × RLOO's, so the penalty's
    score term shrinks by (G−1)/G = ½ at G = 2; an in-loss term does not."""
    for name, scale in (("k1-reward", 0.5), ("k3-loss", 1.0), ("k1-reward-prefixis", 1.0)):
        config = KLConfig.from_name(name, beta=0.1)
        rloo = expected_gradient(problem, toy_loss_config(config), mode)
        mean = expected_gradient(problem, toy_loss_config(config, advantage="group-mean"), mode)
        assert torch.allclose(mean, scale * rloo, rtol=1e-9, atol=1e-12), name


def test_token_mean_divides_fixed_length_sequences_by_their_length():
    problem = make_problem(seed=0, **PROBLEMS["fixed"])
    true_grad = sequence_kl_gradient(problem)
    for name in ("k1-reward", "k3-both", "k1-reward-prefixis"):
        config = toy_loss_config(KLConfig.from_name(name, beta=0.1), aggregation="token-mean")
        exact = expected_gradient(problem, config, "on")
        assert torch.allclose(exact, true_grad / problem.space.horizon, rtol=1e-9, atol=1e-12), name


def test_the_papers_value_clamp_acts_on_k3_and_biases_it(problem, true_grad):
    """The paper's async runs clamp K̂_t at 10; on these problems K3 reaches ~27, so the clamp
    acts and k3-both is no longer the sequence-KL gradient (its effect, stated)."""
    kl = KLConfig.from_name("k3-both", beta=0.1, value_clamp=10.0)
    e = enumerate_sequences(problem, "on", problem.theta)
    assert kl_stats(kl, e.logp, e.ref_logp, e.mask)["kl/clamped_tokens"] > 0
    assert _rel(expected_gradient(problem, kl, "on"), true_grad) > 1e-3
    assert describe(kl)["on"].target == SEQUENCE_REVERSE_KL  # describe's claim assumes no clamp acts
