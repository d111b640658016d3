#!/usr/bin/env bash
# session 35 run 2: the multi-row Q8_0 mat-vec (q8_mv MR 2-4) on CUDA and its sweep; StreamedMvLaunch takes m rows
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run2; mkdir -p $R
t() { local name=$1 lim=$2; shift 2; timeout $lim "$@" > $R/$name.log 2>&1; echo "$name rc $?"; grep -E "FAILED|Error|passed|failed" $R/$name.log | cut -c1-300 | head -12; }
t test_rows 150 python3 -m pytest tests/ops/test_ggml_mv_rows.py tests/ops/test_ggml_q8_mv.py tests/ops/test_ggml_q6k_mv.py tests/ops/test_ggml_q4_rows.py tests/ops/test_ggml_handoff.py -q -p no:cacheprovider -n 14 -rf --tb=short
t test_ggml_routes 60 python3 -m pytest tests/ops/test_ggml.py -q -p no:cacheprovider -n 14 -rf --tb=short -k "routes or odd_element or Q6_K or Q8_0"
timeout 150 python3 bench/gguf_mv_sweep.py --types Q8_0 --rows 1,2,3,4 --grid "Q8_BN=8" --shapes 4096x14336,14336x4096,4096x4096 --out $R/q8_rows_sweep.json > $R/q8_rows_sweep.log 2>&1
echo "sweep rc $?"; grep -v "^    x" $R/q8_rows_sweep.log | cut -c1-150
t test_quant_mv 150 python3 -m pytest tests/ops/test_quant.py -q -p no:cacheprovider -n 14 -rf --tb=short -k "affine_mv or streamed or odd or handoff or rows"
tar -czf $OUT/run2.tgz -C /tmp run2
