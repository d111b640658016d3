#!/usr/bin/env bash
# session 34 run 1: session 33's host-only refactor (f08d1de) on CUDA; dequantize throughput per format
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > $R/gpu.txt
for spec in "tests/ops/test_moe.py::" "tests/ops/test_quant_prefill.py::" "tests/ops/test_ggml.py::chunk or prefill"; do
  f=${spec%%::*}; k=${spec#*::}; n=$(basename $f .py)
  timeout 150 python3 -m pytest $f -q -p no:cacheprovider -n 14 -v -rf --tb=line ${k:+-k "$k"} > $R/$n.log 2>&1
  echo "$n rc $?"; grep -E "FAILED|Error|passed|failed" $R/$n.log | cut -c1-300 | head -30
done
timeout 150 python3 bench/dequant_sweep.py --out $R/dequant_sweep.json > $R/dequant_sweep.log 2>&1; echo "dequant rc $?"
cat $R/dequant_sweep.log | tail -30
tar -czf $OUT/run1.tgz -C /tmp run1
