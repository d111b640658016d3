#!/usr/bin/env bash
# session 25 run 11: rows that take no whole 128-word step (affine_mv today) on the integer-dot kernel with a partial
# last step: Llama-2-7B's down projection (K 11008), Gemma-3-27B-like K 5376, K 2880
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
G="4,1,0,1;4,2,0,1;8,2,0,1;4,4,0,1;4,8,0,1"
timeout 400 python3 bench/affine_mv_sweep.py --kernel idot --grid "$G" --shapes 11008x4096,5376x4096,5376x21504,2880x2880,1536x576 \
  --out $OUT/idot_tail2.json > $OUT/idot_tail2.log 2>&1
grep -E "^K |^  bn|^BEST" $OUT/idot_tail2.log | grep -v "MLX_NATIVE_AFFINE_MV"
