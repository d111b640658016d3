#!/usr/bin/env bash
# Session 47 run 6: the one-row MLX 4-bit g64 integer-dot kernel's launch constants on the H200 (every earlier sweep
# of them ran on an H100: sessions 8, 25, 29), issue 4's three shapes, against the default route and cuBLAS bf16.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/bench
G="8,4,0,1;16,4,0,1;4,4,0,1;8,2,0,1;8,2,1,1;4,2,1,1;4,2,0,1;16,2,1,1;8,1,1,1;16,1,1,1;4,1,1,1;2,2,1,1;2,4,0,1"
G="$G;8,8,0,1;4,8,0,1;4,2,1,2;8,2,1,2;16,4,1,1"
timeout 540 python3 bench/affine_mv_sweep.py --kernel idot --shapes 4096x4096,4096x14336,14336x4096 --grid "$G" \
  --out $OUT/idot_sweep.json > $OUT/idot_sweep.log 2>&1
echo "sweep rc $?"; grep -v "^\s*$" $OUT/idot_sweep.log | cut -c1-160 | tail -80
