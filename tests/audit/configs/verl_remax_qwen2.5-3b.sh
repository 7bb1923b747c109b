# Modelled on volcengine/verl examples/remax_trainer/run_qwen2.5-3b_seq_balance.sh at b178a3cd56f58b2d502255daba591e92833930a7:
# ReMax advantages with K1 (kl) in the reward: an advantage estimator the audit does not run.
set -x

python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=remax \
    data.train_batch_size=512 \
    actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct \
    actor_rollout_ref.actor.use_dynamic_bsz=True \
    actor_rollout_ref.actor.use_kl_loss=False \
    algorithm.use_kl_in_reward=True \
    algorithm.kl_penalty=kl \
    algorithm.kl_ctrl.kl_coef=0.001 \
    trainer.experiment_name='qwen2.5_3b_function_rm_kl1e-3' \
    trainer.total_epochs=5 $@
