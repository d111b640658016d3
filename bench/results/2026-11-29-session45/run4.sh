#!/usr/bin/env bash
# Session 45 run 4: after head_norm_rope_qk in the Qwen3 decoder and the router's 8-row limit: model / rope / MoE
# tests on CUDA, the router and step rows, the Qwen3-30B-A3B-shaped decode.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
timeout 240 python3 -m pytest tests/models tests/ops/test_moe.py tests/ops/test_rope.py tests/runtime/test_gpu_integration.py \
  -m gpu -p no:cacheprovider -n 14 -q --tb=short > $OUT/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed|Error" $OUT/tests.log | cut -c1-240 | tail -14
timeout 100 python3 bench/run_all.py --out $OUT/quant --families quant \
  --ops moe_router_qwen3-30b-a3b,moe_router_qwen3.6-35b-a3b,moe_step_qwen3-30b-a3b > $OUT/quant.log 2>&1
echo "quant rc $?"; grep "^\[bench\]" $OUT/quant.log | cut -c1-230
timeout 125 python3 bench/model.py --out $OUT/model --only llama8b --arch qwen3-30b-a3b --layers-8b 12 \
  --kinds-8b mlx-affine-4bit-g64,gguf-Q4_K --reps 3 --profile > $OUT/model.log 2>&1
echo "model rc $?"; grep "tok/s" $OUT/model.log | grep "^\[model\]" | cut -c1-200
