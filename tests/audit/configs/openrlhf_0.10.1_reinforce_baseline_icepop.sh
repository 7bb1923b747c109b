# Modelled on OpenRLHF/OpenRLHF examples/scripts/train_reinforce_baseline_hybrid_engine.sh at v0.10.1
# (33f9d72fbac7ada09979fd0873c27b1cca0cc0e1): K2 in the loss, --init_kl_coef 1e-5, ICEPOP engine correction
# (--enable_vllm_is_correction --vllm_is_correction_type icepop), settings in variables.
set -x

MODEL=OpenRLHF/Llama-3-8b-sft-mixture
KL=1e-5
ESTIMATOR=k2

python3 -m openrlhf.cli.train_ppo_ray \
   --ref_num_nodes 1 \
   --actor_num_nodes 1 \
   --actor_num_gpus_per_node 8 \
   --colocate_all_models \
   --init_kl_coef ${KL} \
   --gamma 1.0 \
   --use_kl_loss \
   --kl_estimator $ESTIMATOR \
   --advantage_estimator reinforce_baseline \
   --pretrain "$MODEL" \
   --n_samples_per_prompt 8 \
   --enable_vllm_is_correction \
   --vllm_is_correction_type icepop \
   --packing_samples
