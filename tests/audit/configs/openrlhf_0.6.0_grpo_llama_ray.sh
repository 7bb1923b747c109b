# Modelled on OpenRLHF/OpenRLHF examples/scripts/train_grpo_llama_ray.sh at v0.6.0 (bfa85f6fa8cd6214707f93883fac5d08334f4f06):
# GRPO's K3 in the loss by the pre-0.7 flags --use_kl_loss --use_kl_estimator_k3, --init_kl_coef 1e-3.
set -x

ray job submit --address="http://127.0.0.1:8265" \
   --runtime-env-json='{"working_dir": "/openrlhf"}' \
   -- python3 -m openrlhf.cli.train_ppo_ray \
   --ref_num_nodes 1 \
   --ref_num_gpus_per_node 1 \
   --actor_num_nodes 1 \
   --actor_num_gpus_per_node 4 \
   --vllm_num_engines 2 \
   --pretrain OpenRLHF/Llama-3-8b-sft-mixture \
   --save_path /openrlhf/examples/test_scripts/checkpoint/llama3-8b-rlhf \
   --micro_train_batch_size 16 \
   --train_batch_size 128 \
   --rollout_batch_size 1024 \
   --n_samples_per_prompt 8 \
   --prompt_max_len 1024 \
   --generate_max_len 1024 \
   --init_kl_coef 1e-3 \
   --gamma 1.0 \
   --use_kl_loss \
   --use_kl_estimator_k3 \
   --advantage_estimator group_norm \
   --zero_stage 3 \
   --bf16 \
   --actor_learning_rate 5e-7 \
   --prompt_data OpenRLHF/prompt-collection-v0.1 \
   --apply_chat_template \
   --packing_samples \
   --ckpt_path /openrlhf/examples/test_scripts/ckpt/llama3-8b-rlhf

# also supports --advantage_estimator rloo | reinforce_baseline
