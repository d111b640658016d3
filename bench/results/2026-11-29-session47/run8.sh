#!/usr/bin/env bash
# Session 47 run 8: where a batch-1 prefill's time goes (prefill_profile.py): SmolLM2-135M-shaped Q4_1 and
# Llama-3-8B-shaped (4 layers, MLX 4-bit / Q4_K), pp512 and pp2048. carry [".whl"] (gguf for the synthetic file).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/gguf*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
timeout 300 python3 bench/results/2026-11-29-session47/prefill_profile.py > $OUT/prefill_profile.log 2>&1
echo "rc $?"; grep "^\[pp\]" $OUT/prefill_profile.log | cut -c1-230
