"""The assertion on hand-written losses: K1 in the reward (RLOO advantages) follows the sequence's reverse KL
on-policy and nothing named off-policy, its sequence-weighted form follows it off-policy too, K3 in the loss
follows the per-token forward KL, K1 in the loss zero; each failure names the target followed."""

import re

import pytest
import torch

from klrl_audit import GROUP, GroupBatch


def k1_in_the_reward(batch: GroupBatch, sequence_weighted: bool = False) -> torch.Tensor:
    """R̃ = R − Σ_t δ_t (no gradient), leave-one-out advantages within each group, −A·Σ_t log πθ."""
    penalty = ((batch.logp - batch.ref_logp) * batch.mask).sum(-1).detach()
    rewards = (batch.rewards - penalty).reshape(-1, GROUP)
    advantages = (rewards - (rewards.sum(-1, keepdim=True) - rewards) / (GROUP - 1)).reshape(-1)
    score = (batch.logp * batch.mask).sum(-1)
    if sequence_weighted:  # πθ(y)/q(y), without gradient
        score = score * (score - (batch.sampling_logp * batch.mask).sum(-1)).exp().detach()
    return -(advantages * score).mean()


def k3_in_the_loss(batch: GroupBatch) -> torch.Tensor:
    """Σ_t (ρ_t − 1 + δ_t), ρ_t = πref/πθ, averaged over sequences."""
    delta = batch.logp - batch.ref_logp
    return (((-delta).exp() - 1 + delta) * batch.mask).sum(-1).mean()


def k1_in_the_loss(batch: GroupBatch) -> torch.Tensor:
    return ((batch.logp - batch.ref_logp) * batch.mask).sum(-1).mean()


def test_k1_in_the_reward_follows_the_sequence_reverse_kl_on_policy(assert_kl_gradient):
    verdict = assert_kl_gradient(k1_in_the_reward, target="sequence-reverse-kl", policy="on")
    assert verdict.follows == "sequence-reverse-kl"
    assert verdict.bias < 1e-10


def test_k3_in_the_loss_fails_naming_the_per_token_forward_kl(assert_kl_gradient):
    message = (
        "the expected KL gradient on-policy follows the per-token forward KL, not the sequence reverse KL "
        "(relative distance 0.826; bias against the sequence reverse KL 0.826)"
    )
    with pytest.raises(AssertionError, match=f"^{re.escape(message)}$"):
        assert_kl_gradient(k3_in_the_loss, target="sequence-reverse-kl", policy="on")
    assert_kl_gradient(k3_in_the_loss, target="token-forward-kl", policy="on")


def test_k1_in_the_loss_is_zero_on_policy(assert_kl_gradient):
    with pytest.raises(
        AssertionError, match="^the expected KL gradient on-policy follows the zero gradient, not the sequence"
    ):
        assert_kl_gradient(k1_in_the_loss)
    assert assert_kl_gradient(k1_in_the_loss, target="zero").bias == pytest.approx(1.0, abs=1e-12)


def test_off_policy_k1_in_the_reward_follows_nothing_named_and_its_sequence_weight_fixes_it(assert_kl_gradient):
    with pytest.raises(
        AssertionError, match=r"^the expected KL gradient off-policy follows none of the named targets \(closest: the "
    ):
        assert_kl_gradient(k1_in_the_reward, policy="off")
    weighted = assert_kl_gradient(lambda batch: k1_in_the_reward(batch, sequence_weighted=True), policy="off")
    assert weighted.bias < 1e-10


def test_the_verdict_without_asserting(kl_audit, kl_toy_problem):
    verdict = kl_audit(k3_in_the_loss, policy="off", problem=kl_toy_problem)
    assert verdict.follows == "other"
    assert verdict.bias == pytest.approx(1.510, abs=5e-4)  # docs/audit.md: k3-loss off-policy
    assert verdict.distance("zero") == pytest.approx(
        verdict.gradient.norm() / verdict.targets["sequence-reverse-kl"].norm()
    )


def test_a_token_mean_is_compared_multiplied_by_the_length(assert_kl_gradient):
    def token_mean(batch):
        delta = batch.logp - batch.ref_logp
        return (((-delta).exp() - 1 + delta) * batch.mask).sum() / batch.mask.sum()

    with pytest.raises(AssertionError, match="follows none of the named targets"):
        assert_kl_gradient(token_mean, target="token-forward-kl")
    assert_kl_gradient(token_mean, target="token-forward-kl", tokens_averaged=True)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"policy": "sideways"}, "policy: 'sideways' is not one of on, off, mismatch"),
        (
            {"target": "reverse-kl"},
            "target: 'reverse-kl' is not one of sequence-reverse-kl, token-reverse-kl, token-forward-kl, zero",
        ),
    ],
)
def test_a_wrong_argument_is_one_line(assert_kl_gradient, arguments, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        assert_kl_gradient(k3_in_the_loss, **arguments)


def test_a_loss_that_is_not_a_scalar_is_one_line(assert_kl_gradient):
    with pytest.raises(ValueError, match=r"^the loss function returned a tensor of shape \(13122, 4\), not a scalar$"):
        assert_kl_gradient(lambda batch: batch.logp)
    with pytest.raises(ValueError, match="^the loss function returned float, not a scalar tensor$"):
        assert_kl_gradient(lambda batch: 0.0)
