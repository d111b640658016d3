#!/usr/bin/env bash
# Session 41 run 7 (branch moe-mv-tiles, not run): run 6's tiles as the routed GGUF kernel's rules; the MoE decode tests
# on CUDA and the decode step (run 5: Q6_K 28.39, Q8_0 25.11 us). Logs straight to $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 60 python3 bench/moe_gguf_decode.py --types Q6_K,Q8_0 > $OUT/moe_gguf_decode.log 2>&1
echo "bench rc $?"; cat $OUT/moe_gguf_decode.log
timeout 100 python3 -m pytest tests/ops/test_moe.py -v -p no:cacheprovider -n 14 --tb=short \
  -k "decode_kernels or knobs or streamed_mv_rules or moe_ggml" > $OUT/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $OUT/tests.log | cut -c1-200 | tail -8
