#!/usr/bin/env bash
# session 28 run 14: branch wide-x-steps: wide_x_kernel with 16, 4 or 1 steps of a row per program
# (mmv.WIDE_X_STEPS); GPU tests of the tensor-core decode kernel first
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl_gguf/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
R=/tmp/run14; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 150 python3 -m pytest tests/ops/test_ggml.py -q -p no:cacheprovider -n 12 -k "tensor_core or wide or extreme" > $R/tests.log 2>&1
tail -2 $R/tests.log
timeout 300 python3 bench/results/2026-11-26-session28/xsteps_ab.py $R/xsteps_ab.json > $R/xsteps_ab.log 2>&1
grep -E "X_STEPS=|MISMATCH|Error" $R/xsteps_ab.log | head -60
tar -czf $OUT/run14.tgz -C /tmp run14
