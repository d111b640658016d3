#!/usr/bin/env bash
# Session 41 run 4 (branch moe-q6k-mv): routed decode of GGUF Q6_K experts on q6k_mv's loop (ops/moe/gguf_mv.py);
# q6k_mv's loop factored out (offline sm_90 SASS unchanged). MoE / q6k_mv tests on CUDA, then the routed GGUF MoE
# decode bench (run 1 / session 36: the tiled routed kernel, Qwen3-30B-A3B-shaped step Q6_K 48.1 us).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
R=/tmp/run4; rm -rf $R; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 200 python3 -m pytest tests/ops/test_moe.py tests/ops/test_ggml_q6k_mv.py -v -p no:cacheprovider -n 12 \
  --tb=short > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $R/tests.log | cut -c1-200 | tail -15
timeout 150 python3 bench/moe_gguf_decode.py --types Q4_K,Q6_K,Q8_0 > $R/moe_gguf_decode.log 2>&1
echo "bench rc $?"; cat $R/moe_gguf_decode.log
timeout 100 python3 bench/moe_gguf_decode.py --types Q6_K --tokens 2 > $R/moe_gguf_decode_t2.log 2>&1
echo "bench t2 rc $?"; cat $R/moe_gguf_decode_t2.log
tar -czf $OUT/run4.tgz -C /tmp run4
