# Modelled on volcengine/verl examples/reinforce_plus_plus_trainer/run_qwen2-7b_math_rf.sh at b178a3cd56f58b2d502255daba591e92833930a7:
# its kl_loss_type=mse is unused (use_kl_loss=False); the KL is in the reward with the default kl_penalty (kl),
# under REINFORCE++ advantages, which whiten over the batch: not an audited setting.
set -x

python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=reinforce_plus_plus \
    data.train_batch_size=1024 \
    actor_rollout_ref.actor.use_kl_loss=False \
    actor_rollout_ref.actor.kl_loss_coef=0.001 \
    actor_rollout_ref.actor.kl_loss_type=mse \
    algorithm.use_kl_in_reward=True \
    trainer.total_epochs=15 $@
