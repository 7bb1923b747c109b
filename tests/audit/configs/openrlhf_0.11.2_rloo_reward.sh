# Modelled on OpenRLHF/OpenRLHF examples/scripts/train_ppo_ray_hybrid_engine.sh at v0.11.0
# (3c3be6234e0cb353e76bb8019947db9dfe99fca7), with the critic replaced by RLOO advantages (the README's
# --algo.advantage.estimator variant): K1 in the reward, the default --algo.kl.estimator.
python3 -m openrlhf.cli.train_ppo_ray \
   --ref.num_nodes 1 \
   --actor.num_nodes 1 \
   --train.colocate_all \
   --algo.kl.init_coef 0.01 \
   --algo.advantage.estimator rloo \
   --rollout.n_samples_per_prompt 4 \
   --actor.model_name_or_path OpenRLHF/Llama-3-8b-sft-mixture
