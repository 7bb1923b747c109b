#!/usr/bin/env bash
# Modelled on volcengine/verl examples/grpo_trainer/run_deepseek671b_math_megatron_96gb.sh at b178a3cd56f58b2d502255daba591e92833930a7:
# settings in shell variables (${VAR}, ${VAR:-default}, $((…)), $(…)), --config-name ppo_megatron_trainer,
# "+key=value" overrides; use_kl_loss=True with kl_loss_type left at verl's default (low_var_kl).
set -xeuo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

adv_estimator=grpo

use_kl_in_reward=False
kl_coef=0.0
use_kl_loss=True
kl_loss_coef=0.001

max_prompt_length=$((1024 * 2))
max_response_length=$((1024 * 8))
loss_agg_mode="token-mean"

NNODES=${NNODES:-12}
RAY_DATA_HOME=${RAY_DATA_HOME:-"${HOME}/verl"}
MODEL_PATH=$RAY_DATA_HOME/models/DeepSeek-V3-config-verl
train_tp=${TP:-8}

python3 -m verl.trainer.main_ppo \
    --config-path=config \
    --config-name='ppo_megatron_trainer.yaml' \
    data.max_prompt_length=${max_prompt_length} \
    data.max_response_length=${max_response_length} \
    algorithm.adv_estimator=${adv_estimator} \
    algorithm.use_kl_in_reward=${use_kl_in_reward} \
    algorithm.kl_ctrl.kl_coef=${kl_coef} \
    actor_rollout_ref.actor.megatron.use_mbridge=True \
    actor_rollout_ref.actor.use_kl_loss=${use_kl_loss} \
    actor_rollout_ref.actor.kl_loss_coef=${kl_loss_coef} \
    actor_rollout_ref.actor.clip_ratio_c=10.0 \
    actor_rollout_ref.model.path="${MODEL_PATH}" \
    +actor_rollout_ref.actor.optim.override_optimizer_config.optimizer_cpu_offload=True \
    actor_rollout_ref.actor.megatron.tensor_model_parallel_size=${train_tp} \
    actor_rollout_ref.actor.loss_agg_mode=${loss_agg_mode} \
    actor_rollout_ref.rollout.max_num_batched_tokens=$((max_prompt_length + max_response_length)) \
    actor_rollout_ref.nccl_timeout=1200 \
    trainer.nnodes="${NNODES}" \
    trainer.total_epochs=10
