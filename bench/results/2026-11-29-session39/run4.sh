#!/usr/bin/env bash
# the MLX 2 / 4-row integer-dot kernel with whole-row steps (4 warps for K = 4096, 8 for K = 8192), never swept:
# its grid so far had 1-2 warps, while the one-row kernel's whole-row steps made it faster
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
R=/tmp/run4; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 420 python3 bench/affine_mv_sweep.py --rows 2,4 --shapes 4096x14336,4096x4096,8192x28672 \
  --grid "8,2,0,1;8,4,0,1;4,4,0,1;4,2,0,1;8,8,0,1;4,8,0,1" --out $R/rows_sweep.json > $R/rows_sweep.log 2>&1
echo "sweep rc $?"; grep -E "BEST|default route|mmv\)|split" $R/rows_sweep.log | cut -c1-160 | head -70
tar -czf $OUT/run4.tgz -C /tmp run4
