#!/usr/bin/env bash
# main after the merge (tile rule): the Q6_K streamed / rows test files on CUDA (their real-size q6k_idot cases now
# take 8-row tiles at 4096 x 14336, 16-row tiles at 2-4 rows)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run9; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 150 python3 -m pytest tests/ops/test_ggml_q6k_mv.py tests/ops/test_ggml_mv_rows.py -q -p no:cacheprovider -n 16 -rf --tb=short > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|Error|passed|failed" $R/tests.log | cut -c1-300 | head -12
tar -czf $OUT/run9.tgz -C /tmp run9
