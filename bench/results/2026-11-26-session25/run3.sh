#!/usr/bin/env bash
# session 25 run 3: launch constants of the one-row MLX integer-dot kernel re-swept (session 8's sweep predates
# session 18's load fix), three 8B shapes, plus smaller row tiles and 4-warp steps
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 400 python3 bench/affine_mv_sweep.py --kernel idot --shapes 4096x14336,14336x4096,4096x4096 \
  --out $OUT/idot_sweep.json 2>&1 | tee $OUT/idot_sweep.log | grep -v "^$" | sort -t'|' -k1,1 | tail -80
