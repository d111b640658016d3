#!/usr/bin/env bash
# session 25 run 10: the one-row MLX integer-dot kernel with a partial last step (TAIL): rows of 1792 / 640 words on
# 4- and 8-warp steps
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
G="4,2,0,1;4,4,0,1;8,4,0,1;4,8,0,1;8,8,0,1;16,8,0,1;16,4,0,1;8,2,0,1"
timeout 400 python3 bench/affine_mv_sweep.py --kernel idot --grid "$G" --shapes 14336x4096,5120x5120,14336x1024,14336x8192 \
  --out $OUT/idot_tail.json > $OUT/idot_tail.log 2>&1
grep -E "^K |^  bn|^BEST" $OUT/idot_tail.log | grep -v "MLX_NATIVE"
