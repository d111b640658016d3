#!/usr/bin/env bash
# Session 48 run 1: session 47's prepared run 10 (batch-1 prefill chunks replayed from a CUDA graph), then issue 4's
# target rows with peers (MLX g64 4-bit, GGUF Q4_0 / Q4_K at 1-16 rows; the MoE decode step) on whatever card came.
# carry [".whl"] (gguf wheel).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/env.txt
timeout 150 python3 bench/results/2026-11-29-session47/prefill_graph.py --lengths 128,512,2048 > $OUT/prefill_graph.log 2>&1
echo "graph rc $?"; grep -E "^\[graph\]|Error|error" $OUT/prefill_graph.log | cut -c1-300 | tail -12
timeout 300 python3 bench/run_all.py --out /tmp/bench --families quant \
  --ops qmm_affine_4b_g64,ggml_matmul_Q4_0,ggml_matmul_Q4_K,moe_ffn_qwen3-30b-a3b,moe_step_qwen3-30b-a3b > $OUT/bench.log 2>&1
echo "bench rc $?"; cp /tmp/bench/results.json $OUT/ 2>/dev/null
grep -E "^\[bench\]|copy bandwidth" $OUT/bench.log | grep -E " M(1|2|4|8|16) |T1 |copy" | cut -c1-200
