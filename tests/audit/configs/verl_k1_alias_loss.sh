# Modelled on volcengine/verl examples/grpo_trainer/run_deepseek7b_llm_math.sh at b178a3cd56f58b2d502255daba591e92833930a7,
# with kl_loss_type=kl (verl's alias of k1) in the loss.
set -x
KL_TYPE=${KL_TYPE:-kl}
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    actor_rollout_ref.actor.use_kl_loss=True \
    actor_rollout_ref.actor.kl_loss_coef=0.001 \
    actor_rollout_ref.actor.kl_loss_type=${KL_TYPE} \
    algorithm.use_kl_in_reward=False \
    trainer.total_epochs=15 $@
