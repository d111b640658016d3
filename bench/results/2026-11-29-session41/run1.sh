#!/usr/bin/env bash
# Session 41 run 1 (branch moe-block-mmv + the launch rules of next_q5k.sh's sweep): block_mmv / routing / routed MoE
# tests on CUDA, then the routed GGUF MoE decode bench (session 36 run 5, the tiled routed kernel: Qwen3-30B-A3B-shaped
# step Q6_K 48.1 us, Q8_0 44.5).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 260 python3 -m pytest tests/ops/test_ggml_block_mmv.py tests/ops/test_ggml.py tests/ops/test_moe.py -v \
  -p no:cacheprovider -n 12 --tb=short -k "block_mmv or streamed or routes or ggml" > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $R/tests.log | cut -c1-200 | tail -15
timeout 200 python3 bench/moe_gguf_decode.py --types Q4_K,Q6_K,Q8_0 > $R/moe_gguf_decode.log 2>&1
echo "bench rc $?"; cat $R/moe_gguf_decode.log
tar -czf $OUT/run1.tgz -C /tmp run1
