#!/usr/bin/env bash
# session 28 run 13: branch wide-prefetch: wide steps asking L2 for their first weights before the PDL wait
# (mmv.WIDE_PREFETCH) against none; GPU tests of the tensor-core decode kernel first
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl_gguf/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
R=/tmp/run13; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 150 python3 -m pytest tests/ops/test_ggml.py -q -p no:cacheprovider -n 12 -k "tensor_core or wide or extreme" > $R/tests.log 2>&1
tail -2 $R/tests.log
timeout 300 python3 bench/results/2026-11-26-session28/prefetch_ab.py $R/prefetch_ab.json > $R/prefetch_ab.log 2>&1
grep -E "PREFETCH=|MISMATCH|Error" $R/prefetch_ab.log | head -60
tar -czf $OUT/run13.tgz -C /tmp run13
