#!/usr/bin/env bash
# session 28 run 10: branch mp8: packed tiles at up to 8 rows of x with 8-row x tiles (mmv.MP8) against 16
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl_gguf/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
R=/tmp/run10; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 150 python3 -m pytest tests/ops/test_ggml.py -q -p no:cacheprovider -n 12 -k "tensor_core or wide or extreme" > $R/tests.log 2>&1
tail -2 $R/tests.log
timeout 300 python3 bench/results/2026-11-26-session28/mp8_ab.py $R/mp8_ab.json > $R/mp8_ab.log 2>&1
grep -E "MP8=|MISMATCH|Error" $R/mp8_ab.log | head -80
tar -czf $OUT/run10.tgz -C /tmp run10
