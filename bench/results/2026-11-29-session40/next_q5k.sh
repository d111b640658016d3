#!/usr/bin/env bash
# Prepared on branch block-mmv-q5k (not run): GGUF Q5_K on block_mmv.py -- its tests on CUDA, then the sweep
# (prefetch x programs per SM, 3-16 rows) against the route before it (q4k_idot_rows / q4k_mv rows at 2-4, 4-row
# slices at 5, the tiled decode kernel at 6-16); Q6_K / Q8_0 routes again (the generalized loads must not move them)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
R=/tmp/next_q5k; mkdir -p $R
timeout 200 python3 -m pytest tests/ops/test_ggml_block_mmv.py -v -p no:cacheprovider -n 8 --tb=short > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $R/tests.log | cut -c1-200 | tail -15
S=bench/results/2026-11-29-session40/block_mmv_sweep.py
timeout 220 python3 $S --fmt Q5_K --rows 3,4,5,8,16 --shapes 4096x14336,14336x4096,4096x4096 > $R/sweep_q5k.log 2>&1
echo "q5k rc $?"; cut -c1-400 $R/sweep_q5k.log
timeout 60 python3 $S --fmt Q6_K --rows 8,16 --shapes 4096x14336 --variants 0 > $R/route_q6k.log 2>&1; cat $R/route_q6k.log
timeout 60 python3 $S --fmt Q8_0 --rows 8,16 --shapes 4096x14336 --variants 0 > $R/route_q8.log 2>&1; cat $R/route_q8.log
tar -czf $OUT/next_q5k.tgz -C /tmp next_q5k
