#!/usr/bin/env bash
# session 35 run 3: the multi-row Q5_K mat-vec (q4k_mv MR 2-4) on CUDA and its sweep
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run3; mkdir -p $R
t() { local name=$1 lim=$2; shift 2; timeout $lim "$@" > $R/$name.log 2>&1; echo "$name rc $?"; grep -E "FAILED|Error|passed|failed" $R/$name.log | cut -c1-300 | head -12; }
t test_rows 150 python3 -m pytest tests/ops/test_ggml_mv_rows.py tests/ops/test_ggml_q5k_mv.py tests/ops/test_ggml_q4k_rows.py -q -p no:cacheprovider -n 14 -rf --tb=short
t test_ggml 150 python3 -m pytest tests/ops/test_ggml.py -q -p no:cacheprovider -n 14 -rf --tb=short
timeout 170 python3 bench/gguf_mv_sweep.py --types Q5_K --rows 1,2,3,4 --grid "Q5K_BN=16" --shapes 4096x14336,14336x4096,4096x4096 --out $R/q5k_rows_sweep.json > $R/q5k_rows_sweep.log 2>&1
echo "sweep rc $?"; grep -v "^    x" $R/q5k_rows_sweep.log | cut -c1-150
tar -czf $OUT/run3.tgz -C /tmp run3
