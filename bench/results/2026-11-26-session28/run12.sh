#!/usr/bin/env bash
# session 28 run 12: branch q40-natural: wide Q4_0 steps with code words rebuilt in block order (no x launch)
# against wide_x_kernel's x; GPU tests of the tensor-core decode kernel first
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl_gguf/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
R=/tmp/run12; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 150 python3 -m pytest tests/ops/test_ggml.py -q -p no:cacheprovider -n 12 -k "tensor_core or wide or extreme" > $R/tests.log 2>&1
tail -2 $R/tests.log
timeout 300 python3 bench/results/2026-11-26-session28/natural_ab.py $R/natural_ab.json > $R/natural_ab.log 2>&1
grep -E "NATURAL=|MISMATCH|Error" $R/natural_ab.log | head -60
tar -czf $OUT/run12.tgz -C /tmp run12
