#!/usr/bin/env bash
# Session 45 run 3: the router's warps per row count (sweep), its rows and the step rows, the model rows, tests.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
timeout 100 python3 bench/results/2026-11-29-session45/router_warps.py > $OUT/router_warps.log 2>&1
echo "sweep rc $?"; cat $OUT/router_warps.log | cut -c1-200 | tail -8
timeout 120 python3 -m pytest tests/ops/test_moe.py -k "router or route or ffn" \
  -p no:cacheprovider -n 12 -q --tb=short > $OUT/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed|Error" $OUT/tests.log | cut -c1-240 | tail -12
timeout 100 python3 bench/run_all.py --out $OUT/quant --families quant \
  --ops moe_router_qwen3-30b-a3b,moe_router_qwen3.6-35b-a3b,moe_step_qwen3-30b-a3b > $OUT/quant.log 2>&1
echo "quant rc $?"; grep "^\[bench\]" $OUT/quant.log | cut -c1-230
timeout 125 python3 bench/model.py --out $OUT/model --only llama8b --arch qwen3-30b-a3b --layers-8b 12 \
  --kinds-8b mlx-affine-4bit-g64,gguf-Q4_K --reps 3 > $OUT/model.log 2>&1
echo "model rc $?"; grep "tok/s" $OUT/model.log | grep "^\[model\]" | cut -c1-200
