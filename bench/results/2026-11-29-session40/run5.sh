#!/usr/bin/env bash
# after run 4: the GGUF test files on CUDA (block_mmv's real sizes included); Q8_0 on the 4096 x 128256 head (no K
# split: prefetch on / off) and the final routes of Q8_0 / Q6_K against the route before
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
R=/tmp/run5; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 220 python3 -m pytest tests/ops/test_ggml_block_mmv.py tests/ops/test_ggml.py tests/ops/test_ggml_mv_rows.py \
  tests/ops/test_ggml_q8_mv.py tests/ops/test_ggml_q6k_mv.py tests/ops/test_ggml_q6k_idot.py -v -p no:cacheprovider \
  -n 8 --tb=short > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $R/tests.log | cut -c1-200 | tail -15
S=bench/results/2026-11-29-session40/block_mmv_sweep.py
timeout 100 python3 $S --fmt Q8_0 --rows 5,16 --shapes 4096x128256 > $R/sweep_q8_head.log 2>&1
echo "q8 head rc $?"; cut -c1-400 $R/sweep_q8_head.log
timeout 90 python3 $S --fmt Q8_0 --rows 5,8,16 --shapes 4096x14336,14336x4096 --variants 0 > $R/route_q8.log 2>&1
echo "q8 route rc $?"; cut -c1-300 $R/route_q8.log
timeout 90 python3 $S --fmt Q6_K --rows 4,8,16 --shapes 4096x14336,14336x4096 --variants 0 > $R/route_q6k.log 2>&1
echo "q6k route rc $?"; cut -c1-300 $R/route_q6k.log
tar -czf $OUT/run5.tgz -C /tmp run5
