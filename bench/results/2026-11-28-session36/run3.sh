#!/usr/bin/env bash
# session 36 run 3: Q5_K 2-4 rows on the integer-dot rows kernel (q4k_idot_rows.py's Q5K); the GGUF tests on CUDA;
# the Q5_K rows sweep (MLX_NATIVE_GGML_IDOT=0: q4k_mv's MR rows, before); the quant family's Q5_K rows with peers
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 150 python3 bench/gguf_mv_sweep.py --types Q5_K --rows 2,3,4 --shapes 4096x14336,14336x4096,4096x4096 --out $R/q5k_rows_sweep.json > $R/sweep.log 2>&1; echo "sweep rc $?"
grep -E "us " $R/sweep.log | cut -c1-140
timeout 100 python3 bench/run_all.py --out $R/bench --families quant --ops ggml_matmul_Q5_K > $R/bench.log 2>&1
echo "bench rc $?"; grep -E "^\[bench\]" $R/bench.log | cut -c1-220 | head -8
timeout 300 python3 -m pytest tests/ops/test_ggml.py tests/ops/test_ggml_handoff.py tests/ops/test_ggml_q4k_rows.py tests/ops/test_ggml_q5k_mv.py tests/ops/test_ggml_mv_rows.py -q -p no:cacheprovider -n 16 -rf --tb=short > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|Error|passed|failed" $R/tests.log | cut -c1-300 | head -12
tar -czf $OUT/run3.tgz -C /tmp run3
