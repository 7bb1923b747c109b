# Modelled on volcengine/verl examples/gspo_trainer/run_qwen30b_gspo.sh at b178a3cd56f58b2d502255daba591e92833930a7:
# GSPO with both KL switches off ($use_kl_loss and $use_kl_in_reward false): no KL term.
set -x

adv_estimator=grpo
use_kl_in_reward=False
kl_coef=0.0
use_kl_loss=False
kl_loss_coef=0.0
loss_mode=gspo
loss_agg_mode="seq-mean-token-mean"

python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=$adv_estimator \
    algorithm.use_kl_in_reward=$use_kl_in_reward \
    algorithm.kl_ctrl.kl_coef=$kl_coef \
    actor_rollout_ref.actor.policy_loss.loss_mode=${loss_mode} \
    actor_rollout_ref.actor.loss_agg_mode=${loss_agg_mode} \
    actor_rollout_ref.actor.use_kl_loss=$use_kl_loss \
    actor_rollout_ref.actor.kl_loss_coef=$kl_loss_coef \
    trainer.total_epochs=10
