# Modelled on volcengine/verl examples/ppo_trainer/run_qwen1.5_moe_a2.7b-gsm8k_megatron.sh at b178a3cd56f58b2d502255daba591e92833930a7
# (its commented `ray job submit … --` launch, run here): GRPO with kl_loss_type=mse, verl's alias of k2.
set -x

RAY_ADDRESS='auto' ray job submit --working-dir . -- \
python3 -m verl.trainer.main_ppo --config-path=./config --config-name='ppo_megatron_trainer' \
    algorithm.adv_estimator=grpo \
    actor_rollout_ref.actor.use_kl_loss=True \
    actor_rollout_ref.actor.kl_loss_coef=0.001 \
    actor_rollout_ref.actor.kl_loss_type=mse \
    algorithm.use_kl_in_reward=False \
    trainer.total_epochs=15 2>&1 | tee verl_demo.log
