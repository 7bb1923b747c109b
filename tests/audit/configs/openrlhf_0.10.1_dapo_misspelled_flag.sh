# Modelled on OpenRLHF/OpenRLHF examples/scripts/train_dapo_ray_hybrid_engine.sh at v0.10.1
# (33f9d72fbac7ada09979fd0873c27b1cca0cc0e1), down to its last flag, --vllm_enable_is_correction, which no
# OpenRLHF parser has (0.10.1's is --enable_vllm_is_correction): OpenRLHF refuses it, so does the audit.
set -x

python3 -m openrlhf.cli.train_ppo_ray \
   --ref_num_nodes 1 \
   --actor_num_nodes 1 \
   --colocate_all_models \
   --init_kl_coef 1e-3 \
   --gamma 1.0 \
   --use_kl_loss \
   --kl_estimator k3 \
   --advantage_estimator group_norm \
   --dynamic_filtering \
   --dynamic_filtering_reward_range 0 1 \
   --eps_clip_low_high 0.2 0.27 \
   --pretrain OpenRLHF/Llama-3-8b-sft-mixture \
   --n_samples_per_prompt 8 \
   --param_dtype bf16 \
   --vllm_enable_sleep \
   --deepspeed_enable_sleep \
   --vllm_enable_is_correction
