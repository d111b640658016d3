#!/usr/bin/env bash
# session 25 run 4: the one-row MLX integer-dot kernel, whole-row steps (8 rows, 4 warps) and K splits of the
# long rows, on the 8B shapes and others the rule would touch
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
G="4,2,0,1;8,4,0,1;16,4,0,1;4,4,0,1;8,4,0,4;4,2,0,16;8,2,0,16;16,2,0,32;8,8,0,1;16,8,0,1;4,1,0,1"
timeout 500 python3 bench/affine_mv_sweep.py --kernel idot --grid "$G" \
  --shapes 4096x1024,4096x4096,4096x14336,14336x4096,4096x128256,8192x8192,2048x8192,8192x2048,5120x5120 \
  --out $OUT/idot_sweep2.json > $OUT/idot_sweep2.log 2>&1
grep -E "^K |^  bn|^BEST" $OUT/idot_sweep2.log | grep -v "MLX_NATIVE"
