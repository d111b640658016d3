#!/usr/bin/env bash
# block_mmv.py (Q6_K and Q8_0): its tests on CUDA (with -m gpu's real sizes) and the GGUF routing / rows tests; the
# Q8_0 sweep (prefetch x programs per SM) against the route before it; Q6_K's route now against before
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
R=/tmp/run4; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 200 python3 -m pytest tests/ops/test_ggml_block_mmv.py tests/ops/test_ggml.py tests/ops/test_ggml_mv_rows.py -v \
  -p no:cacheprovider -n 8 --tb=short -k "block_mmv or streamed_slices or routes or rows" > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $R/tests.log | cut -c1-200 | tail -15
S=bench/results/2026-11-29-session40/block_mmv_sweep.py
timeout 200 python3 $S --fmt Q8_0 --rows 3,5,8,16 --shapes 4096x14336,14336x4096,4096x4096 > $R/sweep_q8.log 2>&1
echo "q8 sweep rc $?"; cut -c1-400 $R/sweep_q8.log
timeout 100 python3 $S --fmt Q6_K --rows 3,4,8,16 --variants 0 > $R/route_q6k.log 2>&1
echo "q6k route rc $?"; cut -c1-300 $R/route_q6k.log
tar -czf $OUT/run4.tgz -C /tmp run4
