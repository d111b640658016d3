#!/usr/bin/env bash
# Session 42 run 12 (main with balanced_split): test_quant.py on CUDA, then the quant bench rows of MLX g64 4-bit and
# GGUF Q4_K with peers (cuBLAS bf16 on the dequantized weight, int4pack).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
timeout 200 python3 -m pytest tests/ops/test_quant.py -p no:cacheprovider -n 12 -q --tb=short > $OUT/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $OUT/tests.log | cut -c1-200 | tail -6
timeout 300 python3 bench/run_all.py --out $OUT/bench --families quant --ops qmm_affine_4b_g64,ggml_matmul_Q4_K \
  > $OUT/bench.log 2>&1
echo "bench rc $?"; grep "^\[bench\]" $OUT/bench.log | grep -E " M(1|2|4|8|16) " | cut -c1-220
