#!/usr/bin/env bash
# One command on a GPU machine with torch and transformers (no network needed): ~10 training
# steps through the FSDP path in bf16 with activation checkpointing, then step time, generated
# tokens/s and peak GPU memory. Arguments go to benchmarks/gpu_check.py, e.g.
#   benchmarks/gpu_check.sh --gpus 8 --model smollm2
#   benchmarks/gpu_check.sh --device cpu --steps 2     # the same path on CPUs (gloo)
# PYTHON picks the interpreter (default: .venv/bin/python if present, else python3).
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
exec "$PYTHON" benchmarks/gpu_check.py "$@"
