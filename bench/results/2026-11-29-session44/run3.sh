#!/usr/bin/env bash
# Session 44 run 3: the strided-ids tests on CUDA (views made on the device) and the router mat-vec spellings.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
timeout 200 python3 -m pytest tests/ops/test_moe.py tests/ops/test_quant.py tests/ops/test_ggml.py -k "strided or warps" \
  -p no:cacheprovider -n 4 -q --tb=short > $OUT/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed|Error" $OUT/tests.log | cut -c1-240 | tail -8
timeout 120 python3 bench/results/2026-11-29-session44/router_gemv.py > $OUT/router.log 2>&1
echo "router rc $?"; cat $OUT/router.log | cut -c1-300
