#!/usr/bin/env bash
# session 34 run 8: the GatherQmmPlan review (strides computed once) on CUDA
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run8; mkdir -p $R
timeout 100 python3 -m pytest tests/ops/test_quant.py -q -p no:cacheprovider -n 14 -v -rf --tb=line -k "gather or moe" > $R/test_quant.log 2>&1
echo "test_quant rc $?"; grep -E "FAILED|Error|passed|failed" $R/test_quant.log | cut -c1-300 | head -20
tar -czf $OUT/run8.tgz -C /tmp run8
