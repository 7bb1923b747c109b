# Modelled on OpenRLHF/OpenRLHF examples/scripts/train_vlm_math_hybrid_engine.sh at v0.11.0
# (3c3be6234e0cb353e76bb8019947db9dfe99fca7): --algo.kl.init_coef 0, no reference model, no KL term.
python3 -m openrlhf.cli.train_ppo_ray \
   --actor.num_nodes 1 \
   --actor.num_gpus_per_node 8 \
   --algo.kl.init_coef 0 \
   --algo.kl.use_loss \
   --algo.kl.estimator k2 \
   --algo.advantage.estimator reinforce_baseline \
   --rollout.n_samples_per_prompt 8 \
   --actor.freeze_visual_encoder
