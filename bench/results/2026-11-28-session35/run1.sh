#!/usr/bin/env bash
# session 35 run 1: session 34's host-only review (grouped.grouped_launch, ae30f85) on CUDA
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $R/gpu.txt
timeout 240 python3 -m pytest tests/ops/test_moe.py -q -p no:cacheprovider -n 14 -rf --tb=short > $R/test_moe.log 2>&1
echo "test_moe rc $?"; grep -E "FAILED|Error|passed|failed" $R/test_moe.log | cut -c1-300 | head -20
timeout 150 python3 -m pytest tests/ops/test_quant.py -q -p no:cacheprovider -n 14 -rf --tb=short -k "gather or moe or grouping" > $R/test_quant.log 2>&1
echo "test_quant rc $?"; grep -E "FAILED|Error|passed|failed" $R/test_quant.log | cut -c1-300 | head -20
tar -czf $OUT/run1.tgz -C /tmp run1
