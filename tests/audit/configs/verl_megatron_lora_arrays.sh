#!/usr/bin/env bash
# Modelled on volcengine/verl examples/grpo_trainer/run_qwen2-7b_math_megatron_lora.sh at b178a3cd56f58b2d502255daba591e92833930a7:
# overrides grouped in bash arrays (with comments inside), expanded as "${ARRAY[@]}"; K3 (low_var_kl) in the loss.
set -xeuo pipefail

adv_estimator=grpo
train_files="['$HOME/data/gsm8k/train.parquet']"

DATA=(
    data.train_files="$train_files"
    data.train_batch_size=128
    data.truncation='error'
)

MODEL=(
    actor_rollout_ref.model.path=Qwen/Qwen2-7B-Instruct
    actor_rollout_ref.model.lora.rank=256
    # # Optional: canonical LoRA
    # actor_rollout_ref.model.lora.type="canonical_lora"
)

ACTOR=(
    actor_rollout_ref.actor.optim.lr=1e-6
    actor_rollout_ref.actor.ppo_mini_batch_size=16
    actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4
    actor_rollout_ref.actor.use_kl_loss=True
    actor_rollout_ref.actor.kl_loss_coef=0.001
    actor_rollout_ref.actor.kl_loss_type=low_var_kl
    +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method=uniform
)

ALGORITHM=(
    algorithm.adv_estimator=$adv_estimator
    algorithm.use_kl_in_reward=False
)

TRAINER=(
    trainer.logger='["console","wandb"]'
    trainer.total_epochs=15
)

python3 -m verl.trainer.main_ppo \
    --config-path=config \
    --config-name='ppo_megatron_trainer.yaml' \
    "${DATA[@]}" \
    "${ALGORITHM[@]}" \
    "${MODEL[@]}" \
    "${ACTOR[@]}" \
    "${TRAINER[@]}" \
    "$@"
