#!/usr/bin/env bash
# Session 41 run 2: block_mmv's launch rules checked (programs_rule, prefetch_rule, Q5_K from 3 rows): Q6_K's branch
# form (ROWS4, pinned prefetch) swept over prefetch x programs per SM, the Q5_K and Q8_0 routes against the route
# before (MLX_NATIVE_MMV=off) at the rows of next_q5k.sh.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
R=/tmp/run2; mkdir -p $R
S=bench/results/2026-11-29-session40/block_mmv_sweep.py
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 220 python3 $S --fmt Q6_K --rows 4,8,16 --shapes 4096x14336,14336x4096,4096x4096 > $R/sweep_q6k.log 2>&1
echo "q6k rc $?"; cut -c1-400 $R/sweep_q6k.log
timeout 130 python3 $S --fmt Q5_K --rows 3,4,8,16 --shapes 4096x14336,14336x4096,4096x4096 --variants 0 \
  > $R/route_q5k.log 2>&1
echo "q5k rc $?"; cat $R/route_q5k.log
timeout 60 python3 $S --fmt Q5_K --rows 2 --shapes 4096x14336,14336x4096 > $R/sweep_q5k_2rows.log 2>&1
echo "q5k 2 rows rc $?"; cut -c1-400 $R/sweep_q5k_2rows.log
timeout 100 python3 $S --fmt Q8_0 --rows 5,8,16 --shapes 4096x14336,14336x4096,4096x4096 --variants 0 \
  > $R/route_q8.log 2>&1
echo "q8 rc $?"; cat $R/route_q8.log
tar -czf $OUT/run2.tgz -C /tmp run2
