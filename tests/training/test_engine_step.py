"""The engine correction in the learner: rollouts that carry an engine's log-probs get the
mismatch metrics, and with `engine_correction` the gradient the trainer applies is that of the
hand-written loss with every token's policy and KL terms weighted by μ/e (truncated)."""

import math

import pytest
import torch

from klrl.training import trainer as trainer_module
from klrl.training.sampling import completion_texts
from klrl.training.scoring import completion_logits, token_logp
from klrl.training.trainer import Trainer

from conftest import tiny_config
from training.test_step import BETA, _parity_reward, hand_written_loss, learn_capturing_the_gradient


@pytest.mark.slow
@pytest.mark.parametrize("correction", [None, "token-truncate", "sequence-truncate"])
def test_engine_weights_multiply_both_terms_of_the_applied_gradient(
    tiny_base, arith_data, tmp_path, monkeypatch, correction
):
    monkeypatch.setattr(trainer_module, "get_reward", lambda _: _parity_reward)
    config = tiny_config(
        tiny_base, arith_data, "k3-loss", BETA, reward="parity", steps=3, lr=0.05, grad_clip=1e9, micro_batch_size=5
    )
    trainer = Trainer(config, tmp_path)
    trainer.learner.config.engine_correction = (
        correction  # as a vllm run sets it (the hf sampler records no engine log-probs)
    )
    trainer.learner.config.engine_cap = 1.5
    torch.manual_seed(0)
    trainer.policy.load_state_dict({k: v + 0.05 * torch.randn_like(v) for k, v in trainer.policy.state_dict().items()})
    rollout = trainer.actor.sample(0, version=0).rollout
    rewards = torch.tensor(_parity_reward(completion_texts(trainer.tokenizer, rollout), None))
    mask = rollout.completion_mask.float()

    trainer.policy.train()
    params = list(trainer.policy.parameters())
    logp = token_logp(completion_logits(trainer.policy, rollout), rollout.completion_ids)
    with torch.no_grad():
        ref = token_logp(completion_logits(trainer.reference, rollout), rollout.completion_ids)
    noise = 0.3 * torch.randn(mask.shape, generator=torch.Generator().manual_seed(1))
    rollout.engine_logp = (logp.detach() + noise) * mask  # an engine that disagrees with the trainer's μ = πθ
    log_ratio = -noise * mask
    if correction is None:
        weights = None
    elif correction == "token-truncate":
        weights = log_ratio.exp().clamp(max=1.5) * mask
    else:
        weights = log_ratio.sum(-1, keepdim=True).exp().clamp(max=1.5) * mask
    loss = hand_written_loss("k3-loss", logp, ref, None, rewards, mask, 4, "rloo", "seq-sum", None, weights)
    expected = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params)])

    record, applied = learn_capturing_the_gradient(trainer, params, monkeypatch, rollout, rewards, 0)
    gap = (applied.double() - expected).norm() / expected.norm()
    assert gap < 1e-5, gap
    assert record["engine/max_abs_log_ratio"] == pytest.approx(log_ratio.abs().max().item(), rel=1e-5)
    assert record["engine/mean_abs_log_ratio"] == pytest.approx((log_ratio.abs().sum() / mask.sum()).item(), rel=1e-5)
    if correction is None:
        assert "engine/fraction_corrected" not in record
    else:
        units = mask if correction == "token-truncate" else torch.ones(mask.shape[0], 1)
        acted = (log_ratio if correction == "token-truncate" else log_ratio.sum(-1, keepdim=True)) > math.log(1.5)
        assert record["engine/fraction_corrected"] == pytest.approx(((acted * units).sum() / units.sum()).item())
