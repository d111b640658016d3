#!/usr/bin/env bash
# session 37 run 4: the q6k_idot tests on CUDA (the final kernel: prefetch, size rule), real sizes included
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run4; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 300 python3 -m pytest tests/ops/test_ggml_q6k_idot.py -q -p no:cacheprovider -n 16 -rf --tb=short --durations=5 > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|Error|passed|failed|s call" $R/tests.log | cut -c1-300 | head -14
tar -czf $OUT/run4.tgz -C /tmp run4
