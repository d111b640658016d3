#!/usr/bin/env bash
# session 37 run 1: the Q6_K integer-dot one-row kernel (ops/ggml/q6k_idot.py): its knob sweep against q6k_mv
# (MLX_NATIVE_GGML_IDOT=0) on Llama-3-8B shapes; its tests and the Q6_K / GGUF matmul tests on CUDA
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 220 python3 bench/gguf_mv_sweep.py --types Q6_K --shapes 4096x14336,14336x4096,4096x4096,4096x128256 --out $R/q6k_sweep.json > $R/sweep.log 2>&1; echo "sweep rc $?"
grep -E "us |copy bandwidth" $R/sweep.log | cut -c1-150
timeout 260 python3 -m pytest tests/ops/test_ggml_q6k_idot.py tests/ops/test_ggml_q6k_mv.py tests/ops/test_ggml.py -q -p no:cacheprovider -n 16 -rf --tb=short > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|Error|passed|failed" $R/tests.log | cut -c1-300 | head -12
tar -czf $OUT/run1.tgz -C /tmp run1
