#!/bin/bash
# Modelled on OpenRLHF/OpenRLHF examples/scripts/train_prorlv2_math_hybrid_engine.sh at v0.11.0
# (3c3be6234e0cb353e76bb8019947db9dfe99fca7): dotted flags, --algo.kl.use_loss --algo.kl.estimator k2,
# --algo.kl.init_coef 1e-4, and 0.11.0's engine-correction flags (--algo.advantage.is_correction_enable/_type).
set -x

SCRIPT_DIR="$(dirname "$0")"
WORK_DIR=$(cd "$SCRIPT_DIR/../.." && pwd)
MODEL_PATH="deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"
SAVE_PATH="${WORK_DIR}/exp/DeepSeek-R1-Qwen-1.5B-PRORLV2"

python3 -m openrlhf.cli.train_ppo_ray \
   --ref.num_nodes 1 \
   --actor.num_nodes 1 \
   --actor.num_gpus_per_node 8 \
   --train.colocate_all \
   --algo.kl.init_coef 1e-4 \
   --algo.advantage.gamma 1.0 \
   --algo.kl.use_loss \
   --algo.kl.estimator k2 \
   --algo.advantage.estimator reinforce_baseline \
   --algo.dynamic_filtering_enable \
   --algo.dynamic_filtering_range 0 1 \
   --actor.eps_clip_low_high 0.2 0.27 \
   --actor.model_name_or_path ${MODEL_PATH} \
   --ckpt.output_dir ${SAVE_PATH} \
   --ckpt.path "${SAVE_PATH}/ckpt" \
   --rollout.n_samples_per_prompt 16 \
   --algo.advantage.is_correction_enable \
   --algo.advantage.is_correction_threshold 0.5 5.0 \
   --algo.advantage.is_correction_type icepop \
   --reward.stop_properly_penalty_coef 0.0
