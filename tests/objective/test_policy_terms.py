"""klrl.objective.policy_terms: advantages, the truncated-IS policy term and loss aggregation."""

import pytest
import torch

from klrl.objective.kl import importance_log_ratio
from klrl.objective.policy_terms import advantages, aggregate, policy_loss_tokens


def test_rloo_is_leave_one_out_and_group_mean_is_centered():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 5.0])
    rloo = advantages(rewards, 4, "rloo")
    assert torch.allclose(rloo[:4], torch.tensor([1.0, -1 / 3, -1 / 3, -1 / 3]))
    assert torch.allclose(rloo[4:], torch.tensor([-1.0, -1.0, -1.0, 3.0]))
    centered = advantages(rewards, 4, "group-mean")
    assert torch.allclose(centered.reshape(2, 4).sum(-1), torch.zeros(2))
    # for G samples, RLOO = G/(G−1) × the group-mean advantage
    assert torch.allclose(rloo, centered * 4 / 3)


def test_advantage_errors_name_the_problem():
    with pytest.raises(ValueError, match="group_size: 3 must be ≥ 2 and divide the batch of 8"):
        advantages(torch.zeros(8), 3)
    with pytest.raises(ValueError, match="advantage kind: 'grpo' is not one of rloo, group-mean"):
        advantages(torch.zeros(8), 4, "grpo")


def test_on_policy_ratio_is_one_with_the_score_gradient():
    logp = torch.tensor([[-1.0, -2.0, -0.5]], requires_grad=True)
    adv = torch.tensor([2.0])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    loss = policy_loss_tokens(importance_log_ratio(logp, logp.detach()), adv, mask)
    assert torch.allclose(loss, torch.tensor([[-2.0, -2.0, 0.0]]))
    (grad,) = torch.autograd.grad(loss.sum(), logp)
    assert torch.allclose(grad, torch.tensor([[-2.0, -2.0, 0.0]]))


def test_truncated_ratio_stops_the_gradient_where_it_clamps():
    logp = torch.tensor([[0.0, 0.0]], requires_grad=True)
    behaviour = torch.tensor([[-3.0, -0.1]])  # ratios e^3 ≈ 20 and e^0.1 ≈ 1.1
    loss = policy_loss_tokens(
        importance_log_ratio(logp, behaviour), torch.tensor([1.0]), torch.ones(1, 2), ratio_clamp=8.0
    )
    assert loss[0, 0].item() == -8.0
    (grad,) = torch.autograd.grad(loss.sum(), logp)
    assert grad[0, 0].item() == 0.0
    assert grad[0, 1].item() == pytest.approx(-torch.exp(torch.tensor(0.1)).item())


def test_aggregation_modes():
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    assert aggregate(loss, mask, "seq-sum").item() == pytest.approx((6 + 4) / 2)
    assert aggregate(loss, mask, "token-mean").item() == pytest.approx(10 / 4)
    with pytest.raises(ValueError, match="aggregation: 'mean' is not one of seq-sum, token-mean"):
        aggregate(loss, mask, "mean")


def test_ppo_clip_stops_the_gradient_outside_the_trust_region():
    from klrl.objective.policy_terms import ppo_loss_tokens

    logp = torch.tensor([[0.0, 0.0, 0.0]], requires_grad=True)
    anchor = torch.tensor([[0.0, -0.5, 0.5]])  # ratios 1, e^0.5 ≈ 1.65, e^-0.5 ≈ 0.61
    loss = ppo_loss_tokens(importance_log_ratio(logp, anchor), torch.tensor([1.0]), torch.ones(1, 3), clip=0.2)
    assert loss[0, 1].item() == pytest.approx(-1.2)  # A > 0: capped at 1 + ε
    assert loss[0, 2].item() == pytest.approx(-torch.exp(torch.tensor(-0.5)).item())  # min keeps the unclipped
    (grad,) = torch.autograd.grad(loss.sum(), logp)
    assert grad[0, 0].item() == pytest.approx(-1.0)
    assert grad[0, 1].item() == 0.0
    assert grad[0, 2].item() == pytest.approx(-torch.exp(torch.tensor(-0.5)).item())
