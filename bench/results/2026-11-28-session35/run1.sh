#!/usr/bin/env bash
# session 35 run 1: the multi-row Q6_K mat-vec (q6k_mv MR 2-4) on CUDA, its sweep, and session 34's host-only
# review (grouped.grouped_launch) on CUDA
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $R/gpu.txt
t() { local name=$1 lim=$2; shift 2; timeout $lim "$@" > $R/$name.log 2>&1; echo "$name rc $?"; grep -E "FAILED|Error|passed|failed" $R/$name.log | cut -c1-300 | head -12; }
t test_q6k $((120)) python3 -m pytest tests/ops/test_ggml_q6k_rows.py tests/ops/test_ggml_q6k_mv.py tests/ops/test_ggml_q4_rows.py -q -p no:cacheprovider -n 14 -rf --tb=short
t test_ggml_routes 60 python3 -m pytest tests/ops/test_ggml.py -q -p no:cacheprovider -n 14 -rf --tb=short -k "routes or odd_element or Q6_K"
timeout 170 python3 bench/gguf_mv_sweep.py --types Q6_K --rows 1,2,3,4 --grid "Q6K_RT=4" --shapes 4096x14336,14336x4096,4096x4096 --out $R/q6k_rows_sweep.json > $R/q6k_rows_sweep.log 2>&1
echo "sweep rc $?"; grep -v "^    x" $R/q6k_rows_sweep.log | cut -c1-150
t test_moe 200 python3 -m pytest tests/ops/test_moe.py -q -p no:cacheprovider -n 14 -rf --tb=short
t test_quant 100 python3 -m pytest tests/ops/test_quant.py -q -p no:cacheprovider -n 14 -rf --tb=short -k "gather or moe or grouping"
tar -czf $OUT/run1.tgz -C /tmp run1
