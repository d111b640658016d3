#!/usr/bin/env bash
# session 36 run 7: after the review (shared code-byte helper, one route for the rows kernel; offline SASS identical):
# the Q4_K / Q5_K integer-dot tests and routes on CUDA
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run7; mkdir -p $R
timeout 150 python3 -m pytest tests/ops/test_ggml.py tests/ops/test_ggml_q4k_rows.py tests/ops/test_ggml_handoff.py tests/ops/test_moe.py -k "idot or route or rows or handoff or gated or ggml" -q -p no:cacheprovider -n 16 -rf --tb=short > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|Error|passed|failed" $R/tests.log | cut -c1-300 | head -12
tar -czf $OUT/run7.tgz -C /tmp run7
