#!/usr/bin/env bash
# GGUF Q6_K 5-8 rows and Q8_0 / Q5_K 5 rows as 4-row slices on the streamed kernels (ggml/kernel.row_slices): the
# ggml routing / rows tests on CUDA, then the route's times at 5 and 8 rows (gguf_rows_slices.py: "now" is the new
# route)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
R=/tmp/run9; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 150 python3 -m pytest tests/ops/test_ggml.py tests/ops/test_ggml_mv_rows.py -q -p no:cacheprovider -n 8 -rf --tb=short -k "slices or routes or rows or matmul_error_bar" > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|Error|passed|failed" $R/tests.log | cut -c1-300 | head -12
timeout 240 python3 bench/results/2026-11-29-session39/gguf_rows_slices.py 5,8 > $R/gguf_rows_slices.log 2>&1
echo "rc $?"; cut -c1-160 $R/gguf_rows_slices.log | head -30
tar -czf $OUT/run9.tgz -C /tmp run9
