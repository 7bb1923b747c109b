#!/bin/bash
# Modelled on THUDM/slime scripts/run-qwen3-4B.sh at 05a07529497d98ce865def3ac77e59fee3679cd7:
# arrays of Megatron-style hyphenated flags, `ray job submit … -- python3 train.py`: not audited yet.
set -ex

NVLINK_COUNT=$(nvidia-smi topo -m 2>/dev/null | grep -o 'NV[0-9][0-9]*' | wc -l)
if [ "$NVLINK_COUNT" -gt 0 ]; then
    HAS_NVLINK=1
else
    HAS_NVLINK=0
fi

GRPO_ARGS=(
   --advantage-estimator grpo
   --use-kl-loss
   --kl-loss-coef 0.00
   --kl-loss-type low_var_kl
   --eps-clip 0.2
)

RUNTIME_ENV_JSON="{
  \"env_vars\": {\"NCCL_NVLS_ENABLE\": \"${HAS_NVLINK}\"}
}"

ray job submit --address="http://127.0.0.1:8265" \
   --runtime-env-json="${RUNTIME_ENV_JSON}" \
   -- python3 train.py \
   --actor-num-nodes 1 \
   --colocate \
   ${GRPO_ARGS[@]}
