# Modelled on volcengine/verl examples/grpo_trainer/run_qwen3-8b.sh at b178a3cd56f58b2d502255daba591e92833930a7,
# with the KL moved to the reward and GRPO's std normalisation off (Dr. GRPO's advice).
set -x
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    algorithm.norm_adv_by_std_in_grpo=False \
    actor_rollout_ref.actor.use_kl_loss=False \
    algorithm.use_kl_in_reward=True \
    algorithm.kl_penalty=k1 \
    algorithm.kl_ctrl.kl_coef=0.001 \
    trainer.total_epochs=15
