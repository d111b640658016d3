#!/usr/bin/env bash
# Session 41 run 5 (branch moe-q8-mv): routed decode of GGUF Q8_0 experts on q8_mv's loop too (ops/moe/gguf_mv.py, one
# kernel for both formats); q8_mv's loop factored out (offline sm_90 SASS unchanged). MoE / q6k_mv / q8_mv tests on
# CUDA, then the routed GGUF MoE decode bench (run 4: Q6_K 28.65 us; the tiled routed kernel Q8_0 44.65).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
R=/tmp/run5; rm -rf $R; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 240 python3 -m pytest tests/ops/test_moe.py tests/ops/test_ggml_q6k_mv.py tests/ops/test_ggml_q8_mv.py -v -p no:cacheprovider \
  -n 14 --tb=short > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $R/tests.log | cut -c1-200 | tail -15
timeout 150 python3 bench/moe_gguf_decode.py --types Q4_K,Q6_K,Q8_0 > $R/moe_gguf_decode.log 2>&1
echo "bench rc $?"; cat $R/moe_gguf_decode.log
timeout 100 python3 bench/moe_gguf_decode.py --types Q6_K,Q8_0 --tokens 2 > $R/moe_gguf_decode_t2.log 2>&1
echo "bench t2 rc $?"; cat $R/moe_gguf_decode_t2.log
tar -czf $OUT/run5.tgz -C /tmp run5
