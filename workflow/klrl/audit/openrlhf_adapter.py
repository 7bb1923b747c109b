"""OpenRLHF's KL settings, run through OpenRLHF's own functions on the toy's tensors (in
.venv-audit-openrlhf, where flash-attn is an empty stand-in: envs/flash_attn_stub).

The functions are those `ActorPPOTrainer.training_step` (trainer/ray/ppo_actor.py) and the
experience maker (trainer/ppo_utils/experience_maker.py) call, composed as they compose them;
those two modules themselves need ray and a DeepSpeed strategy, so the composition is restated
here, line for line:
- KL in the loss (`--algo.kl.use_loss`): `PolicyLoss` (advantages 0: the task reward is 0 and
  no KL is in the reward) plus β·`aggregate_loss(compute_approx_kl(logp, ref, log_probs_old=old,
  kl_estimator, unbiased_gradient))`, `old` being the trainer's old log-probs.
- KL in the reward (the default): `compute_approx_kl` of the old log-probs (no gradient), then
  `compute_reward` (−β·KL per token, the task reward 0 at the last token), the return-to-go of
  `get_cumulative_returns` (γ = 1, which every estimator but `reinforce` forces) as advantages,
  and `PolicyLoss`. The baselines (rloo, group_norm, dr_grpo: the group's; flash_reinforce: the
  batch's) act on the task reward only, before the KL is added: with a task reward of 0 they are
  all this row (REWARD_ESTIMATORS).
- Engine correction (`--algo.advantage.is_correction_level`): `PolicyLoss` given the rollout's
  log-probs (the engine's), its threshold never reached.
"""

from __future__ import annotations

import torch

from klrl.audit.gradients import AuditSetting
from klrl_audit import GroupBatch

ESTIMATORS = ("k1", "k2", "k3")
# the advantage estimators whose KL-in-the-reward row this is (--algo.advantage.estimator): the others
# whiten the advantages over the batch (reinforce, reinforce_baseline) or learn a critic (gae)
REWARD_ESTIMATORS = ("rloo", "group_norm", "dr_grpo", "flash_reinforce")
OPEN_THRESHOLD = (1e-6, 1e6)  # an engine-correction band the toy's weights never leave


def _policy_loss(token_level: bool, is_correction_level: str = "off"):
    from openrlhf.models import PolicyLoss

    return PolicyLoss(
        token_level_loss=token_level, is_correction_level=is_correction_level, is_correction_threshold=OPEN_THRESHOLD
    )


def loss_setting(
    version: str, estimator: str, unbiased_gradient: bool = False, loss_agg_mode: str = "token-mean"
) -> AuditSetting:
    """training_step with --algo.kl.use_loss, --algo.kl.init_coef 1 and the task reward 0."""
    from openrlhf.models import aggregate_loss
    from openrlhf.models.utils import compute_approx_kl

    token_level = loss_agg_mode == "token-mean"
    policy_loss = _policy_loss(token_level)

    def loss(batch: GroupBatch) -> torch.Tensor:
        actor_loss, *_ = policy_loss(
            batch.logp, batch.sampling_logp, torch.zeros_like(batch.logp), action_mask=batch.mask
        )
        kl = compute_approx_kl(
            batch.logp,
            batch.ref_logp,
            log_probs_old=batch.sampling_logp,
            kl_estimator=estimator,
            unbiased_gradient=unbiased_gradient,
        )
        return actor_loss + aggregate_loss(kl, batch.mask, token_level_loss=token_level) * 1.0

    return AuditSetting(
        "OpenRLHF", version, loss_name(estimator, unbiased_gradient, loss_agg_mode), loss, tokens_averaged=True
    )


def loss_name(estimator: str, unbiased_gradient: bool, loss_agg_mode: str) -> str:
    """A KL-in-the-loss setting as the audit table names it."""
    name = f"--algo.kl.use_loss --algo.kl.estimator {estimator}"
    if unbiased_gradient:
        name += " --algo.kl.unbiased_gradient"
    if loss_agg_mode != "token-mean":
        name += f" --actor.loss_agg_mode {loss_agg_mode}"
    return name


def reward_setting(version: str, estimator: str, is_correction_level: str = "off") -> AuditSetting:
    """The experience maker's reward shaping (β = 1) and returns, then PolicyLoss."""
    from openrlhf.models.utils import compute_approx_kl, compute_reward

    policy_loss = _policy_loss(True, is_correction_level)

    def loss(batch: GroupBatch) -> torch.Tensor:
        with torch.no_grad():
            kl = compute_approx_kl(batch.sampling_logp, batch.ref_logp, kl_estimator=estimator)
            rewards = compute_reward(torch.zeros(batch.seqs.shape[0], dtype=kl.dtype), 1.0, kl, action_mask=batch.mask)
            returns = (batch.mask * rewards).flip(-1).cumsum(-1).flip(-1)  # get_cumulative_returns, γ = 1
        rollout = batch.engine_logp if is_correction_level != "off" else None
        actor_loss, *_ = policy_loss(
            batch.logp, batch.sampling_logp, returns, action_mask=batch.mask, rollout_log_probs=rollout
        )
        return actor_loss

    return AuditSetting("OpenRLHF", version, reward_name(estimator, is_correction_level), loss, tokens_averaged=True)


def reward_name(estimator: str, is_correction_level: str) -> str:
    """A KL-in-the-reward setting as the audit table names it."""
    name = f"--algo.kl.estimator {estimator} (KL in the reward)"
    if is_correction_level != "off":
        name += f" --algo.advantage.is_correction_level {is_correction_level}"
    return name


# the audited settings: KL in the loss (estimator, unbiased_gradient, loss_agg_mode), in the reward (estimator, level)
LOSS_SETTINGS = (
    *((estimator, False, "token-mean") for estimator in ESTIMATORS),
    ("k3", True, "token-mean"),
    ("k3", False, "seq-mean-token-mean"),
)
REWARD_SETTINGS = (*((estimator, "off") for estimator in ESTIMATORS), ("k1", "seq"))


def names() -> list[str]:
    """The audited settings' names, without OpenRLHF."""
    return [loss_name(*spec) for spec in LOSS_SETTINGS] + [reward_name(*spec) for spec in REWARD_SETTINGS]


def settings() -> list[AuditSetting]:
    """OpenRLHF's KL settings at its installed version."""
    from importlib.metadata import version

    openrlhf_version = version("openrlhf")
    return [
        *(loss_setting(openrlhf_version, *spec) for spec in LOSS_SETTINGS),
        *(reward_setting(openrlhf_version, *spec) for spec in REWARD_SETTINGS),
    ]
