"""verl's KL settings, run through verl's own code on the toy's tensors (in .venv-audit-verl).

- KL in the loss (`actor_rollout_ref.actor.use_kl_loss=True`): `verl.workers.utils.losses.ppo_loss`
  whole, with verl's `FSDPActorConfig` (`kl_loss_type`, `kl_loss_coef` = β = 1, `loss_agg_mode`);
  the model's output is the toy's log-probs laid out as verl's unpadded sequences (a one-token
  prompt before each completion). With the task reward 0 the advantages are 0, so the loss's
  gradient is the KL term's; verl adds no importance weight to it. On the toy's fixed-length
  sequences `loss_agg_mode` token-mean, seq-mean-token-mean and seq-mean-token-sum-norm give the
  same expected gradient, seq-mean-token-sum T times it: one row of each kind is audited.
- KL in the reward (`algorithm.use_kl_in_reward=True`): `ray_trainer.apply_kl_penalty` (its own
  source, compiled from the installed `verl/trainer/ppo/ray_trainer.py` without running that
  module's imports, which pull in ray's serving stack), with a fixed KL controller of β = 1 and
  `algorithm.kl_penalty`, then verl's advantage estimator (`algorithm.adv_estimator`: rloo, or grpo
  with `norm_adv_by_std_in_grpo=False`) and the same `ppo_loss` without the KL loss: the PPO
  ratio πθ/μ with μ the trainer's old log-probs.
- Rollout correction (`algorithm.rollout_correction.rollout_is=sequence`): the sequence-level
  weight e→μ of the rollout's log-probs, computed by verl's `compute_rollout_correction_weights`, passed to `ppo_loss` as
  `rollout_is_weights` (verl applies it to the policy term only).
"""

from __future__ import annotations

import ast

import numpy as np
import torch

from klrl.audit.gradients import AuditSetting
from klrl_audit import GROUP, GroupBatch

KL_LOSS_TYPES = ("low_var_kl", "k1", "k2", "abs", "k3+", "k1+")
KL_PENALTIES = ("kl", "k3", "k2", "abs")


def _actor_config(**options):
    from verl.workers.config import FSDPActorConfig

    return FSDPActorConfig(
        strategy="fsdp", rollout_n=GROUP, ppo_mini_batch_size=GROUP, ppo_micro_batch_size_per_gpu=GROUP, **options
    )


def _ppo_loss(config, batch: GroupBatch, advantages: torch.Tensor, rollout_is_weights=None) -> torch.Tensor:
    """verl's ppo_loss on the batch: its model output is the toy's log-probs, unpadded."""
    from verl.utils import tensordict_utils
    from verl.workers.utils.losses import ppo_loss

    rows, horizon = batch.seqs.shape
    # verl's unpadded layout: [prompt token, completion...] per row, the log-prob of token t at t - 1
    flat = torch.cat([batch.logp, batch.logp.new_zeros(rows, 1)], dim=1).reshape(-1)
    fields = {
        "prompts": torch.zeros(rows, 1, dtype=torch.long),
        "responses": batch.seqs,
        "attention_mask": torch.ones(rows, 1 + horizon, dtype=torch.long),
        "response_mask": batch.mask.long(),
        "old_log_probs": batch.sampling_logp,
        "advantages": advantages,
        "ref_log_prob": batch.ref_logp,
    }
    if rollout_is_weights is not None:
        fields["rollout_is_weights"] = rollout_is_weights
    data = tensordict_utils.get_tensordict(fields, {"dp_size": 1, "batch_num_tokens": None, "global_batch_size": None})
    loss, _ = ppo_loss(config, {"log_probs": flat}, data)
    return loss


def loss_setting(version: str, kl_loss_type: str, loss_agg_mode: str = "token-mean") -> AuditSetting:
    """ppo_loss with use_kl_loss=True, kl_loss_coef=1 and the task reward 0."""
    config = _actor_config(use_kl_loss=True, kl_loss_type=kl_loss_type, kl_loss_coef=1.0, loss_agg_mode=loss_agg_mode)

    def loss(batch: GroupBatch) -> torch.Tensor:
        return _ppo_loss(config, batch, torch.zeros_like(batch.logp))

    name = loss_name(kl_loss_type, loss_agg_mode)
    return AuditSetting("verl", version, name, loss, tokens_averaged=loss_agg_mode != "seq-mean-token-sum")


def loss_name(kl_loss_type: str, loss_agg_mode: str) -> str:
    """A KL-in-the-loss setting as the audit table names it."""
    return f"use_kl_loss=True, kl_loss_type={kl_loss_type}, loss_agg_mode={loss_agg_mode}"


def _library_function(path: str, name: str):
    """`name` compiled from the installed file `path` alone, its globals the library's own modules."""
    from verl import DataProto
    from verl.trainer.ppo import core_algos
    from verl.utils.torch_functional import masked_mean

    with open(path) as source:
        tree = ast.parse(source.read())
    (node,) = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name]
    namespace = {"torch": torch, "core_algos": core_algos, "masked_mean": masked_mean, "DataProto": DataProto}
    exec(compile(ast.Module([node], type_ignores=[]), path, "exec"), namespace)
    return namespace[name]


def apply_kl_penalty():
    """ray_trainer.apply_kl_penalty, from the installed file (importing ray_trainer runs ray's serving stack)."""
    import importlib.util

    return _library_function(importlib.util.find_spec("verl.trainer.ppo.ray_trainer").origin, "apply_kl_penalty")


def reward_setting(version: str, kl_penalty: str, adv_estimator: str, rollout_is: str | None = None) -> AuditSetting:
    """apply_kl_penalty (β = 1, the task reward 0), the estimator's advantages, then ppo_loss."""
    from verl import DataProto
    from verl.trainer.ppo import core_algos

    penalise = apply_kl_penalty()
    config = _actor_config(use_kl_loss=False)
    estimator = core_algos.get_adv_estimator_fn(adv_estimator)
    options = {"norm_adv_by_std_in_grpo": False} if adv_estimator == "grpo" else {}

    def loss(batch: GroupBatch) -> torch.Tensor:
        rows = batch.seqs.shape[0]
        data = DataProto.from_dict(
            {
                "response_mask": batch.mask,
                "token_level_scores": torch.zeros_like(batch.logp),
                "old_log_probs": batch.sampling_logp,
                "ref_log_prob": batch.ref_logp,
            }
        )
        data, _ = penalise(data, core_algos.FixedKLController(kl_coef=1.0), kl_penalty=kl_penalty)
        index = np.repeat(np.arange(rows // GROUP), GROUP)
        advantages, _ = estimator(data.batch["token_level_rewards"], batch.mask, index, **options)
        weights = None
        if rollout_is is not None:
            weights = _rollout_is_weights(batch, rollout_is)
        return _ppo_loss(config, batch, advantages, weights)

    name = reward_name(kl_penalty, adv_estimator, False, rollout_is)
    return AuditSetting("verl", version, name, loss, tokens_averaged=True)  # the policy term is a token mean


def reward_name(kl_penalty: str, adv_estimator: str, norm_adv_by_std_in_grpo: bool, rollout_is: str | None) -> str:
    """A KL-in-the-reward setting as the audit table names it (norm_adv_by_std_in_grpo only with grpo)."""
    name = f"use_kl_in_reward=True, kl_penalty={kl_penalty}, adv_estimator={adv_estimator}"
    if adv_estimator == "grpo":
        name += f", norm_adv_by_std_in_grpo={norm_adv_by_std_in_grpo}"
    if rollout_is is not None:
        name += f", rollout_correction.rollout_is={rollout_is}"
    return name


def _rollout_is_weights(batch: GroupBatch, level: str) -> torch.Tensor:
    """verl's rollout-correction weights (μ over the engine's e, at `level`), its threshold not reached."""
    from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_weights

    log_ratio = batch.sampling_logp - batch.engine_logp
    weights, _ = compute_rollout_correction_weights(
        log_ratio=log_ratio, response_mask=batch.mask, rollout_is=level, rollout_is_threshold=1e6
    )
    return weights


# the audited settings: KL in the loss (kl_loss_type, loss_agg_mode), KL in the reward (kl_penalty, adv_estimator, rollout_is)
LOSS_SETTINGS = (*((kind, "token-mean") for kind in KL_LOSS_TYPES), ("low_var_kl", "seq-mean-token-sum"))
REWARD_SETTINGS = (*((kind, "rloo", None) for kind in KL_PENALTIES), ("kl", "grpo", None), ("kl", "rloo", "sequence"))


def names() -> list[str]:
    """The audited settings' names, without verl."""
    return [loss_name(*spec) for spec in LOSS_SETTINGS] + [
        reward_name(kind, estimator, False, level) for kind, estimator, level in REWARD_SETTINGS
    ]


def settings() -> list[AuditSetting]:
    """verl's KL settings at its installed version."""
    from importlib.metadata import version

    verl_version = version("verl")
    return [
        *(loss_setting(verl_version, *spec) for spec in LOSS_SETTINGS),
        *(reward_setting(verl_version, kind, estimator, level) for kind, estimator, level in REWARD_SETTINGS),
    ]
