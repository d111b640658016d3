#!/usr/bin/env bash
# session 37 run 3: q6k_idot on the small Q6_K shapes (attn_v 4096 x 1024, 4096 x 4096) against q6k_mv; the quant
# family's Q6_K rows with cuBLAS; the 8B-shaped Q6_K decode with and without the integer-dot kernels; the tests on CUDA
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 100 python3 bench/gguf_mv_sweep.py --types Q6_K --shapes 4096x1024,4096x4096 --grid "IDOT_BN=8,16;PROGRAMS_PER_SM=8;PREFETCH=1" --out $R/q6k_small_sweep.json > $R/sweep.log 2>&1; echo "sweep rc $?"
grep -E "us |copy bandwidth" $R/sweep.log | cut -c1-150
timeout 250 python3 -m pytest tests/ops/test_ggml_q6k_idot.py tests/ops/test_ggml_q6k_mv.py tests/ops/test_ggml.py -q -p no:cacheprovider -n 16 -rf --tb=short > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|Error|passed|failed" $R/tests.log | cut -c1-300 | head -12
timeout 100 python3 bench/run_all.py --out $R/bench --families quant --ops ggml_matmul_Q6_K > $R/bench.log 2>&1
echo "bench rc $?"; grep -E "^\[bench\]" $R/bench.log | cut -c1-220 | head -8
A="--only llama8b --skip-hf --skip-compiled --kinds-8b gguf-Q6_K"
timeout 80 python3 bench/model.py --out $R/model_new $A > $R/model_new.log 2>&1; echo "model_new rc $?"
MLX_NATIVE_GGML_IDOT=0 timeout 80 python3 bench/model.py --out $R/model_old $A > $R/model_old.log 2>&1; echo "model_old rc $?"
grep -h "Q6_K" $R/model_new.log $R/model_old.log | cut -c1-200 | head -6
tar -czf $OUT/run3.tgz -C /tmp run3
