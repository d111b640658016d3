#!/usr/bin/env bash
# session 25 run 13: the GGUF one-row routes on shapes outside Llama-3-8B's (few row tiles, rows of no whole step):
# default route against the word-level kernel (MLX_NATIVE_GGUF_MV=0)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 300 python3 bench/gguf_mv_sweep.py --types Q4_K,Q6_K,Q4_0,Q8_0,Q5_K --grid "PROGRAMS_PER_SM=1" \
  --shapes 4096x1024,14336x1024,11008x4096,5376x4096,1536x576 --out $OUT/gguf_routes.json > $OUT/gguf_routes.log 2>&1
grep -E "M1 K" $OUT/gguf_routes.log
