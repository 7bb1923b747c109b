# Modelled on volcengine/verl examples/grpo_trainer/run_qwen2-7b.sh at b178a3cd56f58b2d502255daba591e92833930a7,
# with kl_loss_type=abs+: |δ|'s value, K2's gradient by core_algos.kl_penalty's straight-through.
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    actor_rollout_ref.actor.use_kl_loss=True \
    actor_rollout_ref.actor.kl_loss_coef=0.01 \
    "actor_rollout_ref.actor.kl_loss_type=abs+" \
    algorithm.use_kl_in_reward=False
