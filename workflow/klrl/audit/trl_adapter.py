"""TRL's KL settings, run through TRL's own code on the toy's tensors.

Each setting calls TRL's own methods on a trainer object made without its constructor (which
needs a transformer, a tokenizer and a dataset): the attributes come from TRL's own config class
(`GRPOConfig`, `RLOOConfig`) with β = 1, copied as the trainer's constructor copies them. What
stands in for the rest is only plumbing: the policy's forward (the toy's per-token log-probs,
`_get_per_token_logps_and_entropies`), the sampler (`_generate`: the enumerated sequences),
the task reward (0, `_calculate_rewards`) and a one-process accelerator.

- GRPOTrainer: the KL term is in `_compute_loss` (K3 per token, added to the loss, optionally
  multiplied by the importance ratio: `use_bias_correction_kl`); with reward 0 the advantages
  are 0, so the loss is the KL term alone. Off-policy the batch carries `old_per_token_logps`
  = log μ, as TRL's does when the policy has moved since the rollout.
- RLOOTrainer: the KL is in the reward, in `_generate_and_score_completions` (Σ_t of log-probs
  of the rollout's model minus πref's, leave-one-out advantages), then `_compute_loss`.
"""

from __future__ import annotations

import contextlib
import tempfile
import warnings
from collections import defaultdict
from types import SimpleNamespace

import torch

from klrl.audit.gradients import AuditSetting
from klrl_audit import GROUP, GroupBatch

RLOO_SETTING = "RLOOTrainer beta>0 (KL in the reward, defaults)"


def _accelerator() -> SimpleNamespace:
    """One process on the CPU: reductions and gathers are the identity."""
    same = lambda tensor, *args, **kwargs: tensor  # noqa: E731
    return SimpleNamespace(
        device=torch.device("cpu"),
        process_index=0,
        num_processes=1,
        sync_gradients=True,
        reduce=same,
        gather=same,
        gather_for_metrics=same,
        autocast=contextlib.nullcontext,
    )


class _Policy:
    """Stands in for a model: the per-token log-probs it gives the batch's rows."""

    def __init__(self, logp: torch.Tensor):
        self.logp = logp
        self.training = True
        self.is_gradient_checkpointing = False


def _log_probs(model: _Policy, input_ids: torch.Tensor, attention_mask, logits_to_keep: int, *args, **kwargs):
    """`_get_per_token_logps_and_entropies` for the toy: (log-probs, entropies, aux loss)."""
    if model.logp.shape != (input_ids.shape[0], logits_to_keep):
        raise ValueError(
            f"toy log-probs {tuple(model.logp.shape)} do not match the batch's completions {(input_ids.shape[0], logits_to_keep)}"
        )
    return model.logp, torch.zeros_like(model.logp), None


def _trainer(trainer_class, args, model: _Policy):
    """A TRL trainer without its constructor: the attributes its loss and scoring code read."""
    trainer = trainer_class.__new__(trainer_class)
    trainer.args = args
    trainer.model = model
    trainer.accelerator = _accelerator()
    trainer.beta = args.beta
    trainer.epsilon_low = args.epsilon
    trainer.epsilon_high = args.epsilon_high if args.epsilon_high is not None else args.epsilon
    trainer.max_completion_length = args.max_completion_length
    trainer.num_generations = args.num_generations
    trainer.use_vllm = args.use_vllm
    trainer.aux_loss_enabled = False
    trainer.router_aux_loss_coef = 0.0
    trainer.current_gradient_accumulation_steps = args.gradient_accumulation_steps
    trainer._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    trainer._get_per_token_logps_and_entropies = _log_probs
    return trainer


def _prompt_inputs(batch: GroupBatch) -> dict:
    rows = batch.seqs.shape[0]
    return {
        "prompt_ids": torch.zeros(rows, 1, dtype=torch.long),
        "prompt_mask": torch.ones(rows, 1, dtype=torch.long),
        "completion_ids": batch.seqs,
        "completion_mask": batch.mask.long(),
    }


def _config(config_class, **options):
    with warnings.catch_warnings():  # transformers' deprecation notice for a field TRL's config sets
        warnings.simplefilter("ignore", FutureWarning)
        return config_class(
            output_dir=tempfile.gettempdir(),
            beta=1.0,
            num_generations=GROUP,
            report_to="none",
            use_cpu=True,
            bf16=False,
            **options,
        )


def grpo_config(**options):
    """GRPOConfig(beta=1, **options) for groups of GROUP."""
    from trl import GRPOConfig

    return _config(GRPOConfig, per_device_train_batch_size=GROUP, **options)


def grpo_trainer(args, logp: torch.Tensor | None = None):
    """A GRPOTrainer of `args` without its constructor, its policy's forward giving `logp`."""
    from trl import GRPOTrainer

    trainer = _trainer(GRPOTrainer, args, _Policy(logp))
    trainer.loss_type = args.loss_type
    trainer.importance_sampling_level = args.importance_sampling_level
    trainer.off_policy_mask_threshold = args.off_policy_mask_threshold
    trainer.top_entropy_quantile = args.top_entropy_quantile
    trainer.entropy_coef = args.entropy_coef
    trainer.use_adaptive_entropy = args.use_adaptive_entropy
    trainer._entropy_bonus_enabled = args.entropy_coef != 0.0 or args.use_adaptive_entropy
    trainer.vllm_importance_sampling_correction = args.vllm_importance_sampling_correction
    return trainer


def grpo_setting(version: str, options: dict) -> AuditSetting:
    """GRPOTrainer._compute_loss with GRPOConfig(beta=1, **options), the task reward 0."""
    args = grpo_config(**options)

    def loss(batch: GroupBatch) -> torch.Tensor:
        trainer = grpo_trainer(args, batch.logp)
        inputs = _prompt_inputs(batch) | {
            "advantages": torch.zeros(batch.seqs.shape[0], dtype=batch.logp.dtype),  # GRPO's, from a reward of 0
            "ref_per_token_logps": batch.ref_logp,
            "num_items_in_batch": batch.mask.sum(),
        }
        if batch.off_policy:
            inputs["old_per_token_logps"] = batch.sampling_logp
        return trainer._compute_loss(trainer.model, inputs)

    name = grpo_name(args.loss_type, args.use_bias_correction_kl, args.importance_sampling_level, not options)
    return AuditSetting("TRL", version, name, loss, tokens_averaged=True)


def grpo_name(loss_type: str, use_bias_correction_kl: bool, importance_sampling_level: str, defaults: bool) -> str:
    """A GRPO setting as the audit table names it (`defaults`: the three are GRPOConfig's own)."""
    return (
        f"GRPOTrainer beta>0, loss_type={loss_type}, use_bias_correction_kl={use_bias_correction_kl}, "
        f"importance_sampling_level={importance_sampling_level}" + (" (defaults)" if defaults else "")
    )


def rloo_setting(version: str) -> AuditSetting:
    """RLOOTrainer._generate_and_score_completions (the KL in the reward) then _compute_loss."""
    from trl import RLOOConfig, RLOOTrainer

    args = _config(RLOOConfig)

    def loss(batch: GroupBatch) -> torch.Tensor:
        rows = batch.seqs.shape[0]
        trainer = _trainer(RLOOTrainer, args, _Policy(batch.sampling_logp))
        trainer.ref_model = _Policy(batch.ref_logp)
        trainer.normalize_advantages = args.normalize_advantages
        trainer.reward_clip_range = args.reward_clip_range
        trainer.num_generations_eval = GROUP
        trainer.reward_weights = torch.ones(1)
        trainer.reward_func_names = ["task"]
        trainer._tokenizer = SimpleNamespace(pad_token_id=0)
        trainer.pad_to_multiple_of = None
        trainer.mask_truncated_completions = False
        trainer.log_multimodal = False
        trainer._logs = {
            "prompt": [],
            "completion": [],
            "rewards": defaultdict(list),
            "advantages": [],
            "extra": defaultdict(list),
        }
        trainer._pending_extra_logs, trainer._pending_metrics = {}, {}
        completions = batch.seqs.tolist()
        trainer._generate = lambda prompts: ([[0]] * rows, completions, [str(ids) for ids in completions])
        trainer._calculate_rewards = lambda *args: torch.zeros(rows, 1, dtype=batch.logp.dtype)
        scored = trainer._generate_and_score_completions([{"prompt": "toy"}] * rows)
        trainer.model = _Policy(batch.logp)
        return trainer._compute_loss(trainer.model, scored)

    return AuditSetting("TRL", version, RLOO_SETTING, loss, tokens_averaged=False)


# the audited GRPOConfig options: its defaults, then each KL option changed
GRPO_OPTIONS = ({}, {"use_bias_correction_kl": False}, {"importance_sampling_level": "sequence"})
GRPO_DEFAULTS = {"loss_type": "dapo", "use_bias_correction_kl": True, "importance_sampling_level": "token"}


def names() -> list[str]:
    """The audited settings' names, without building TRL's trainers."""
    return [grpo_name(**(GRPO_DEFAULTS | options), defaults=not options) for options in GRPO_OPTIONS] + [RLOO_SETTING]


def settings() -> list[AuditSetting]:
    """TRL's KL settings at its installed version: GRPO's defaults, each KL option changed, RLOO's."""
    from importlib.metadata import version

    trl_version = version("trl")
    return [*(grpo_setting(trl_version, options) for options in GRPO_OPTIONS), rloo_setting(trl_version)]
