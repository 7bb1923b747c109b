# Modelled on volcengine/verl examples/grpo_trainer/run_qwen2_5-7b_math.sh at 7cb8d02feb50d61efc6c278c8d9ae89a9af7a181:
# GRPO with K3 (low_var_kl) in the loss, kl_loss_coef 0.001, list-valued overrides built from variables, "$@".
set -x

export VLLM_ATTENTION_BACKEND=XFORMERS

gsm8k_train=$HOME/data/gsm8k/train.parquet
gsm8k_test=$HOME/data/gsm8k/test.parquet
math_train=$HOME/data/math/train.parquet
math_test=$HOME/data/math/test.parquet

train_files="['$gsm8k_train', '$math_train']"
test_files="['$gsm8k_test', '$math_test']"

python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_files="$train_files" \
    data.val_files="$test_files" \
    data.train_batch_size=1024 \
    data.max_prompt_length=1024 \
    data.max_response_length=1024 \
    data.truncation='error' \
    actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.ppo_mini_batch_size=256 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 \
    actor_rollout_ref.actor.use_kl_loss=True \
    actor_rollout_ref.actor.kl_loss_coef=0.001 \
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \
    actor_rollout_ref.actor.entropy_coeff=0 \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.n=5 \
    algorithm.use_kl_in_reward=False \
    trainer.logger=['console','wandb'] \
    trainer.n_gpus_per_node=16 \
    trainer.total_epochs=15 $@
