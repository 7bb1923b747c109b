"""`mixed_precision: bf16-autocast` and `fused_adamw`: the fast path of one CPU process
(klrl.training.precision). What it must keep: the policy and the frozen models score equal
weights equally, bit for bit (the KL is exactly 0 before the first update, μ's ratio exactly 1);
the matrix products run in bfloat16 and attention in float32; the gradient is the float32
gradient up to bfloat16 rounding; the master weights and the saved model stay float32."""

import json

import pytest
import torch

from conftest import tiny_config
from klrl.training.precision import float32_attention, forward_precision
from klrl.training.rollout_queue import Batch
from klrl.training.trainer import Trainer

FAST = {"mixed_precision": "bf16-autocast", "fused_adamw": True}


def test_the_policy_and_reference_score_alike_before_the_first_update(tiny_base, arith_data, tmp_path):
    """The reference holds bfloat16 copies of its linear weights, the policy float32 weights
    that autocast casts: equal products only if the two roundings agree."""
    trainer = Trainer(tiny_config(tiny_base, arith_data, kl="k1-reward", beta=0.1, **FAST), tmp_path)
    record = trainer.train_step()
    assert record["kl/k1"] == 0.0 and record["kl/k3"] == 0.0
    assert record["exact/reverse_kl_token"] == 0.0
    reference, policy = trainer.reference.model.layers[0].mlp, trainer.policy.model.layers[0].mlp
    assert reference.up_proj.weight.dtype == torch.bfloat16
    assert torch.equal(reference.up_proj.weight, policy.up_proj.weight.detach().to(torch.bfloat16))
    assert trainer.reference.get_input_embeddings().weight.dtype == torch.float32
    assert trainer.policy.lm_head.weight.dtype == torch.float32  # master weights, still tied
    assert trainer.policy.lm_head.weight is trainer.policy.get_input_embeddings().weight


def test_the_stale_policy_scores_like_the_policy_at_lag_1(tiny_base, arith_data, tmp_path):
    config = tiny_config(tiny_base, arith_data, kl="k1-loss", beta=0.1, async_lag=1, **FAST)
    record = Trainer(config, tmp_path).train_step()
    assert record["is/ratio_mean"] == 1.0 and record["is/ratio_max"] == 1.0


def test_products_run_in_bfloat16_and_attention_in_float32(tiny_base, arith_data, tmp_path):
    trainer = Trainer(tiny_config(tiny_base, arith_data, **FAST), tmp_path)
    layer = trainer.policy.model.layers[0]
    seen = {}
    layer.mlp.down_proj.register_forward_hook(lambda _m, _i, out: seen.update(linear=out.dtype) and None)
    trainer.train_step()
    assert seen["linear"] == torch.bfloat16
    query, key, value = (torch.randn(2, 1, 5, 8, dtype=torch.bfloat16) for _ in range(3))
    with forward_precision("bf16-autocast", torch.device("cpu")):
        output, _ = float32_attention(layer.self_attn, query, key, value, None, is_causal=True)
    expected = torch.nn.functional.scaled_dot_product_attention(
        query.float(), key.float(), value.float(), is_causal=True
    )
    assert output.dtype == torch.bfloat16
    assert torch.equal(output, expected.transpose(1, 2).to(torch.bfloat16))


def test_the_gradient_is_the_float32_gradient_to_bfloat16_rounding(tiny_base, arith_data, tmp_path):
    """The learner's gradient on one rollout (fixed rewards, so that every advantage counts)
    from the same weights: under bf16-autocast it agrees with float32's in direction (cosine >
    0.99) and in size within 5%."""
    gradients = {}
    rollout = None
    for name, precision in (("float32", {}), ("bf16", {"mixed_precision": "bf16-autocast"})):
        config = tiny_config(tiny_base, arith_data, kl="k3-loss", beta=0.5, grad_clip=1e9, **precision)
        trainer = Trainer(config, tmp_path / name)
        if rollout is None:
            rollout = trainer.actor.sample(0, version=0).rollout
        trainer.learner.optimizer.param_groups[0]["lr"] = 0.0  # read the gradient, do not apply it
        rewards = (torch.arange(rollout.completion_ids.shape[0]) % 3 == 0).float()
        trainer.learner.learn(Batch(0, 0, rollout, None, rewards))
        gradients[name] = torch.cat([p.grad.flatten() for p in trainer.policy.parameters()])
    assert gradients["float32"].norm() > 0
    cosine = torch.nn.functional.cosine_similarity(gradients["float32"], gradients["bf16"], dim=0)
    assert cosine > 0.99
    assert gradients["bf16"].norm().item() == pytest.approx(gradients["float32"].norm().item(), rel=0.05)


def test_a_fast_cell_saves_a_float32_model_that_loads_anywhere(tiny_base, arith_data, tmp_path):
    """final/ holds the float32 master weights, and its config names no attention of klrl's own
    (an evaluation process, which does not register it, must load the model)."""
    trainer = Trainer(tiny_config(tiny_base, arith_data, **FAST), tmp_path)
    assert trainer.learner.optimizer.param_groups[0]["fused"] is True
    assert trainer.run() == "completed"
    config = json.loads((tmp_path / "final" / "config.json").read_text())
    assert "sdpa-float32" not in json.dumps(config)
    assert config["dtype"] == "float32"
