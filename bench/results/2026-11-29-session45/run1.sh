#!/usr/bin/env bash
# Session 45 run 1: moe_router (router + routing in one launch) on CUDA: tests, op rows, the Qwen3-30B-A3B-shaped
# decode before (.old: the tree at the session's start) and after.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 180 python3 -m pytest tests/ops/test_moe.py tests/models/test_moe_checkpoints.py tests/models/test_architectures.py \
  tests/runtime/test_gpu_integration.py -k "moe or route or router" -p no:cacheprovider -n 12 -q --tb=short > $OUT/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed|Error" $OUT/tests.log | cut -c1-240 | tail -12
timeout 120 python3 bench/run_all.py --out $OUT/quant --families quant \
  --ops moe_router_qwen3-30b-a3b,moe_router_qwen3.6-35b-a3b,moe_step_qwen3-30b-a3b,moe_ffn_qwen3-30b-a3b > $OUT/quant.log 2>&1
echo "quant rc $?"; grep "^\[bench\]" $OUT/quant.log | cut -c1-230
for v in new old; do
  pp=$PWD/src; [ $v = old ] && pp=$PWD/.old/src
  PYTHONPATH=/tmp/site:$pp:$PWD/bench timeout 125 python3 bench/model.py --out $OUT/model_$v --only llama8b \
    --arch qwen3-30b-a3b --layers-8b 12 --kinds-8b mlx-affine-4bit-g64,gguf-Q4_K --reps 3 > $OUT/model_$v.log 2>&1
  echo "model $v rc $?"; grep "tok/s" $OUT/model_$v.log | grep "^\[model\]" | cut -c1-200
done
