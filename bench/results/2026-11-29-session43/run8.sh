#!/usr/bin/env bash
# Session 43 run 8 (final main, after the review's token_slots): test_moe.py on CUDA and the GGUF MoE step rows.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
timeout 200 python3 -m pytest tests/ops/test_moe.py -p no:cacheprovider -n 15 -q --tb=short > $OUT/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $OUT/tests.log | cut -c1-220 | tail -8
timeout 60 python3 bench/moe_gguf_decode.py --out $OUT/moe_gguf.json > $OUT/moe_gguf.log 2>&1
echo "moe_gguf rc $?"; cut -c1-120 $OUT/moe_gguf.log
