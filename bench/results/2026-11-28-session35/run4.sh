#!/usr/bin/env bash
# session 35 run 4: Q4kMvLaunch's constexprs (every one passed: Launch now checks), one store_rows for the streamed
# mat-vecs; the ggml tests on CUDA; the
# quant family's rows of the other GGUF formats (Q4_1, Q8_0, Q5_K, Q6_K) at 1, 2 and 4 rows with peers
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run4; mkdir -p $R
t() { local name=$1 lim=$2; shift 2; timeout $lim "$@" > $R/$name.log 2>&1; echo "$name rc $?"; grep -E "FAILED|Error|passed|failed" $R/$name.log | cut -c1-300 | head -12; }
t test_ggml 220 python3 -m pytest tests/ops/test_ggml.py tests/ops/test_ggml_q5k_mv.py tests/ops/test_ggml_mv_rows.py tests/ops/test_ggml_q4k_rows.py tests/ops/test_ggml_q4_rows.py tests/ops/test_ggml_q8_mv.py tests/ops/test_ggml_q6k_mv.py tests/runtime -q -p no:cacheprovider -n 14 -rf --tb=short
timeout 240 python3 bench/run_all.py --out $R/bench --families quant --ops ggml_matmul_Q4_1,ggml_matmul_Q8_0,ggml_matmul_Q5_K,ggml_matmul_Q6_K > $R/bench.log 2>&1
echo "bench rc $?"; tail -40 $R/bench.log | cut -c1-200
tar -czf $OUT/run4.tgz -C /tmp run4
