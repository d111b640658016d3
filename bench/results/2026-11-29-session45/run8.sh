#!/usr/bin/env bash
# Session 45 run 8: moe_router in groups of 8 rows up to 64: router tests on CUDA, router rows.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
timeout 80 python3 -m pytest tests/ops/test_moe.py -k "router" -p no:cacheprovider -n 12 -q --tb=short > $OUT/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed|Error" $OUT/tests.log | cut -c1-240 | tail -8
timeout 80 python3 bench/run_all.py --out $OUT/quant --families quant --ops moe_router_qwen3-30b-a3b > $OUT/quant.log 2>&1
echo "quant rc $?"; grep "^\[bench\]" $OUT/quant.log | cut -c1-230
