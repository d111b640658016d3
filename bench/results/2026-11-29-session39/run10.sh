#!/usr/bin/env bash
# run 9's test selection timed out with failures unnamed: the routing / slices / error-bar tests of test_ggml.py alone
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run10; mkdir -p $R
timeout 130 python3 -m pytest tests/ops/test_ggml.py -q -p no:cacheprovider -n 8 -rf --tb=line -k "slices or routes_to_streamed or matmul_error_bar" > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|passed|failed|^/|Error" $R/tests.log | cut -c1-250 | head -30
tar -czf $OUT/run10.tgz -C /tmp run10
