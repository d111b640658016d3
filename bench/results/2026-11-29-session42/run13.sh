#!/usr/bin/env bash
# Session 42 run 13 (branch gguf-moe-mix): moe_ggml_matmul(topk_weights=) mixing in the routed decode launch: the MoE
# GGUF decode tests on CUDA, then the step (route, gate/up, down, reduce vs down + mix). Logs straight to $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
timeout 90 python3 -m pytest tests/ops/test_moe.py -p no:cacheprovider -n 14 -q --tb=short \
  -k "decode_kernels or topk_weights or knobs or rules or moe_ggml" > $OUT/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $OUT/tests.log | cut -c1-200 | tail -6
timeout 60 python3 bench/moe_gguf_decode.py > $OUT/moe_gguf_decode.log 2>&1; echo "bench rc $?"; cat $OUT/moe_gguf_decode.log
