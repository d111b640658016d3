#!/usr/bin/env bash
# session 35 run 6: the review commit (x_row_stride_of, merged tests) on CUDA, with the device time left
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run6; mkdir -p $R
timeout 150 python3 -m pytest tests/ops/test_ggml_mv_rows.py tests/ops/test_ggml_q4_rows.py tests/ops/test_ggml_q6k_mv.py tests/ops/test_ggml_q8_mv.py tests/runtime/test_launch.py -q -p no:cacheprovider -n 14 -rf --tb=short > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|Error|passed|failed" $R/tests.log | cut -c1-300 | head -12
tar -czf $OUT/run6.tgz -C /tmp run6
