# Modelled on OpenRLHF/OpenRLHF examples/scripts/train_reinforce_baseline_llama_ray_hybrid_engine.sh at v0.8.0
# (a542dd98d29efacef89a4f694366e66c6e6d419b): --use_kl_loss --kl_estimator k2 (0.7's flag), --init_kl_coef 1e-3.
set -x

python3 -m openrlhf.cli.train_ppo_ray \
   --ref_num_nodes 1 \
   --ref_num_gpus_per_node 8 \
   --actor_num_nodes 1 \
   --actor_num_gpus_per_node 8 \
   --vllm_num_engines 4 \
   --vllm_tensor_parallel_size 2 \
   --colocate_all_models \
   --vllm_gpu_memory_utilization 0.6 \
   --init_kl_coef 1e-3 \
   --gamma 1.0 \
   --use_kl_loss \
   --kl_estimator k2 \
   --advantage_estimator reinforce_baseline \
   --pretrain OpenRLHF/Llama-3-8b-sft-mixture \
   --remote_rm_url /openrlhf/examples/python/reward_func.py \
   --micro_train_batch_size 8 \
   --train_batch_size 128 \
   --n_samples_per_prompt 8 \
   --max_len 2048 \
   --zero_stage 3 \
   --bf16 \
   --actor_learning_rate 5e-7 \
   --prompt_data OpenRLHF/prompt-collection-v0.1 \
   --apply_chat_template \
   --gradient_checkpointing \
   --vllm_sync_backend nccl \
   --enforce_eager

# You could also try
#   --kl_estimator k3 \
