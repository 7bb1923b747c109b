"""klrl.objective.kl: estimator values, clamps, config validation, and the terms each placement yields."""

import math

import pytest
import torch

from klrl.objective.kl_config import KLConfig
from klrl.objective.gradient_claims import claims_markdown, describe
from klrl.objective.estimators import ESTIMATORS, STANDARD_CONFIGS
from klrl.objective.kl import importance_log_ratio, kl_stats, kl_terms, token_kl


def test_estimators_match_their_definitions():
    delta = torch.tensor([-2.0, -0.3, 0.0, 0.7, 3.0], dtype=torch.float64)
    zero = torch.zeros_like(delta)
    assert torch.equal(token_kl(delta, zero, "k1").values, delta)
    assert torch.allclose(token_kl(delta, zero, "k2").values, 0.5 * delta**2)
    rho = torch.exp(-delta)
    assert torch.allclose(token_kl(delta, zero, "k3").values, rho - 1 - torch.log(rho))


def test_k3_is_nonnegative_and_accurate_near_zero():
    delta = torch.tensor([1e-6, -1e-6, 1e-4, 5e-3, 2e-2], dtype=torch.float32)
    values = token_kl(delta, torch.zeros(5), "k3").values
    # a naive exp(−δ) − 1 + δ loses every digit in float32 at δ = 1e-6
    exact = torch.expm1(-delta.double()) + delta.double()
    assert torch.allclose(values.double(), exact, rtol=1e-5, atol=0)
    big = token_kl(torch.linspace(-20, 20, 101), torch.zeros(101), "k3").values
    assert (big >= 0).all()


def test_an_estimator_averages_to_the_true_kl_exactly_when_the_registry_says_its_value_is_unbiased():
    torch.manual_seed(0)
    p = torch.softmax(torch.randn(5, dtype=torch.float64), 0)
    r = torch.softmax(torch.randn(5, dtype=torch.float64), 0)
    true_kl = (p * (p.log() - r.log())).sum()
    averages = {name: (p * token_kl(p.log(), r.log(), name).values).sum() for name in ESTIMATORS}
    assert (
        {name for name, mean in averages.items() if torch.allclose(mean, true_kl)}
        == {name for name, estimator in ESTIMATORS.items() if estimator.unbiased_value}
        == {"k1", "k3"}
    )


def test_bf16_inputs_are_computed_in_float32():
    logp = torch.tensor([-1.0, -2.5], dtype=torch.bfloat16)
    ref = torch.tensor([-1.5, -2.0], dtype=torch.bfloat16)
    values = token_kl(logp, ref, "k3").values
    assert values.dtype == torch.float32
    expected = token_kl(logp.float(), ref.float(), "k3").values
    assert torch.equal(values, expected)


def test_clamps_limit_values_and_report_which_tokens():
    logp = torch.tensor([0.0, 12.0, -15.0, 3.0])
    out = token_kl(logp, torch.zeros(4), "k1", log_ratio_clamp=10.0)
    assert out.values.tolist() == [0.0, 10.0, -10.0, 3.0]
    assert out.clamped.tolist() == [False, True, True, False]
    out = token_kl(logp, torch.zeros(4), "k3", value_clamp=10.0)
    assert out.values[2].item() == 10.0  # exp(15) − 1 − 15 clamped
    assert out.clamped.tolist() == [False, True, True, False]


def test_unknown_estimator_lists_the_valid_ones():
    with pytest.raises(ValueError, match="'k4' is not one of k1, k2, k3"):
        token_kl(torch.zeros(1), torch.zeros(1), "k4")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"estimator": "k5", "placement": "loss", "beta": 0.1}, r"KLConfig.estimator: 'k5' is not one of k1, k2, k3"),
        ({"placement": "advantage", "beta": 0.1}, r"KLConfig.placement: 'advantage' is not one of none, reward"),
        ({"placement": "loss", "beta": -1.0}, r"KLConfig.beta: -1.0 must be ≥ 0"),
        ({"placement": "loss", "beta": math.nan}, r"KLConfig.beta"),
        ({"placement": "none", "beta": 0.1}, r"no KL penalty \(kl 'none'\) would be ignored"),
        ({"placement": "loss", "beta": 0.0}, r"adds nothing"),
        ({"placement": "loss", "beta": 0.1, "value_clamp": 0.0}, r"KLConfig.value_clamp: 0.0 must be > 0"),
        ({"placement": "reward", "beta": 0.1, "correction": "token-is"}, r"needs placement 'loss'"),
        ({"estimator": "k2", "placement": "loss", "beta": 0.1, "correction": "token-is"}, r"'k1' or 'k3'"),
        ({"estimator": "k3", "placement": "reward", "beta": 0.1, "correction": "prefix-is"}, r"estimator 'k1'"),
        ({"placement": "loss", "beta": 0.1, "correction": "magic"}, r"KLConfig.correction: 'magic' is not one of"),
        ({"placement": "loss", "beta": 0.1, "is_truncation": 2.0}, r"KLConfig.is_truncation"),
    ],
)
def test_config_validation_names_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        KLConfig(**kwargs)


def test_every_standard_name_round_trips():
    for name in STANDARD_CONFIGS:
        config = KLConfig.from_name(name, beta=0.0 if name == "none" else 0.3)
        assert config.name == name
    assert KLConfig.from_name("k3-loss-tokis", beta=0.1, is_truncation=2.0).correction == "token-is"
    with pytest.raises(ValueError, match="unknown KL configuration 'k3-advantage'.*standard names: none, k1-reward"):
        KLConfig.from_name("k3-advantage", beta=0.1)


def _batch(seed=0, b=4, t=6, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    logp = (-torch.rand(b, t, generator=gen, dtype=dtype) * 2).requires_grad_(True)
    ref = -torch.rand(b, t, generator=gen, dtype=dtype) * 2
    behaviour = -torch.rand(b, t, generator=gen, dtype=dtype) * 2
    mask = torch.ones(b, t, dtype=dtype)
    mask[0, 4:] = 0
    mask[2, 1:] = 0
    return logp, ref, behaviour, mask


def test_reward_placement_gives_a_detached_masked_sum():
    logp, ref, _, mask = _batch()
    terms = kl_terms(KLConfig.from_name("k3-reward", beta=0.2), logp, ref, mask)
    expected = 0.2 * (token_kl(logp, ref, "k3").values * mask).sum(-1)
    assert torch.allclose(terms.reward_penalty, expected.detach())
    assert not terms.reward_penalty.requires_grad
    assert torch.count_nonzero(terms.loss_tokens) == 0


@pytest.mark.parametrize("name", ["k1-loss", "k2-loss", "k3-loss", "k1-both", "k3-both"])
def test_in_loss_gradient_is_nonzero_and_matches_the_formula(name):
    logp, ref, _, mask = _batch()
    beta = 0.3
    terms = kl_terms(KLConfig.from_name(name, beta=beta), logp, ref, mask)
    (grad,) = torch.autograd.grad(terms.loss_tokens.sum(), logp)
    delta = (logp - ref).detach()
    d_estimate = {"k1": torch.ones_like(delta), "k2": delta, "k3": 1 - torch.exp(-delta)}[name[:2]]
    assert torch.allclose(grad, beta * d_estimate * mask)
    assert grad.abs().sum() > 0
    assert (grad[mask == 0] == 0).all()


def test_token_is_weights_the_loss_term_with_gradient():
    logp, ref, behaviour, mask = _batch()
    terms = kl_terms(
        KLConfig.from_name("k3-loss-tokis", beta=0.5), logp, ref, mask, importance_log_ratio(logp, behaviour)
    )
    omega = torch.exp(logp - behaviour)
    k3 = token_kl(logp, ref, "k3").values
    assert torch.allclose(terms.loss_tokens, 0.5 * omega * k3 * mask)
    (grad,) = torch.autograd.grad(terms.loss_tokens.sum(), logp)
    delta = (logp - ref).detach()
    expected = 0.5 * omega.detach() * (k3.detach() + 1 - torch.exp(-delta)) * mask  # ∇(ωK3) = ω(K3 + 1 − ρ)
    assert torch.allclose(grad, expected)


def test_token_is_truncation_caps_the_value_and_keeps_the_gradient():
    logp, ref, behaviour, mask = _batch()
    behaviour = logp.detach() - 1.0  # ω = e ≈ 2.72 everywhere
    config = KLConfig.from_name("k1-loss-tokis", beta=1.0, is_truncation=2.0)
    terms = kl_terms(config, logp, ref, mask, importance_log_ratio(logp, behaviour))
    k1 = (logp - ref).detach()
    assert torch.allclose(terms.loss_tokens, 2.0 * k1 * mask)
    (grad,) = torch.autograd.grad(terms.loss_tokens.sum(), logp)
    assert torch.allclose(grad, 2.0 * (1 + k1) * mask)  # capped weight × ∇(log ω · δ + δ)
    assert kl_stats(config, logp, ref, mask, importance_log_ratio(logp, behaviour))["kl/is_truncated_frac"] == 1.0


def test_prefix_and_sequence_is_weights():
    logp, ref, behaviour, mask = _batch()
    log_w = (logp - behaviour).detach() * mask
    delta = (logp - ref).detach() * mask
    seq = kl_terms(
        KLConfig.from_name("k1-reward-seqis", beta=1.0), logp, ref, mask, importance_log_ratio(logp, behaviour)
    )
    assert torch.allclose(seq.loss_tokens, delta * log_w.sum(-1, keepdim=True).exp() * mask)
    pre = kl_terms(
        KLConfig.from_name("k1-reward-prefixis", beta=1.0), logp, ref, mask, importance_log_ratio(logp, behaviour)
    )
    assert torch.allclose(pre.loss_tokens, delta * log_w.cumsum(-1).exp() * mask)
    assert torch.count_nonzero(pre.reward_penalty) == 0
    # on-policy the weights are 1: the gradient is the causal K1 score-function estimator
    pre_on = kl_terms(KLConfig.from_name("k1-reward-prefixis", beta=1.0), logp, ref, mask)
    (grad,) = torch.autograd.grad(pre_on.loss_tokens.sum(), logp)
    future = delta.flip(-1).cumsum(-1).flip(-1)  # Σ_{s≥t} δ_s
    assert torch.allclose(grad, future * mask)


def test_stats_report_every_estimator_and_clamp_counts():
    logp, ref, _, mask = _batch()
    config = KLConfig.from_name("k3-loss", beta=0.1, log_ratio_clamp=0.5)
    stats = kl_stats(config, logp, ref, mask)
    delta = (logp - ref).detach()
    assert stats["kl/k1"] == pytest.approx(((delta * mask).sum() / 4).item())
    assert stats["kl/k2"] == pytest.approx(((0.5 * delta**2 * mask).sum() / 4).item())
    clamped = ((delta.abs() > 0.5) & mask.bool()).sum().item()
    assert stats["kl/clamped_tokens"] == clamped > 0
    assert stats["kl/clamped_frac"] == pytest.approx(clamped / mask.sum().item())


def test_none_gives_nothing():
    logp, ref, _, mask = _batch()
    terms = kl_terms(KLConfig(), logp, ref, mask)
    assert torch.count_nonzero(terms.reward_penalty) == 0
    assert torch.count_nonzero(terms.loss_tokens) == 0


def test_describe_matches_the_paper_table():
    on = {name: describe(KLConfig.from_name(name, beta=0.1))["on"] for name in STANDARD_CONFIGS if name != "none"}
    assert {n for n, c in on.items() if c.unbiased} == {
        "k1-reward",
        "k1-both",
        "k3-both",
        "k1-reward-seqis",
        "k1-reward-prefixis",
    }
    assert on["k1-loss"].target == "zero"
    assert on["k3-loss"].target == "token-forward-kl"
    assert on["k2-loss"].target == "token-reverse-kl"
    assert on["k3-reward"].target == "other"
    off = {name: describe(KLConfig.from_name(name, beta=0.1))["off"] for name in STANDARD_CONFIGS if name != "none"}
    assert {n for n, c in off.items() if c.unbiased} == {"k1-reward-seqis", "k1-reward-prefixis"}
    assert describe(KLConfig())["on"].unbiased is None


def test_the_table_of_docs_audit_is_generated_from_describe(repo_root):
    page = (repo_root / "docs" / "audit.md").read_text()
    assert claims_markdown() in page
