#!/usr/bin/env bash
# Session 47 run 4 (follows run 3, run3.txt: scripts/gpu_model.sh on the same warm machine; /tmp/smollm2.gguf is there).
# Merged main: the kernels the L2 prefetch touched on CUDA (norms, rope, MoE router), the real SmolLM2 GGUF at a
# depth through the CLI, and the Qwen3-30B-A3B / Llama-3-8B-shaped rows at depths 0 and 4096. carry [".whl"].
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench MLX_NATIVE_SMOLLM2_GGUF=/tmp/smollm2.gguf
timeout 200 python3 -m pytest tests/ops/test_norms.py tests/ops/test_rope.py tests/ops/test_moe.py -p no:cacheprovider \
  -n 12 -q --tb=short > $OUT/tests_ops.log 2>&1
echo "op tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $OUT/tests_ops.log | cut -c1-200 | tail -6
if [ -f /tmp/smollm2.gguf ]; then
  timeout 60 python3 -m mlx_native.cli bench --model /tmp/smollm2.gguf -p 512 -n 128 -d 4096 -r 3 > $OUT/cli_d4096.md 2>&1
  echo "cli d4096 rc $?"; cat $OUT/cli_d4096.md | tail -4
fi
for d in 0 4096; do
  timeout 60 python3 bench/model.py --out /tmp/q$d --only llama8b --arch qwen3-30b-a3b --layers-8b 12 \
    --kinds-8b mlx-affine-4bit-g64,gguf-Q4_K --reps 3 --n-depth $d > $OUT/qwen_d$d.log 2>&1
  echo "qwen d$d rc $?"; grep "tok/s" $OUT/qwen_d$d.log | grep "^\[model\]" | cut -c1-150
  timeout 60 python3 bench/model.py --out /tmp/l$d --only llama8b --kinds-8b mlx-affine-4bit-g64,gguf-Q4_K,gguf-Q4_0 \
    --reps 3 --n-depth $d > $OUT/llama_d$d.log 2>&1
  echo "llama d$d rc $?"; grep "tok/s" $OUT/llama_d$d.log | grep "^\[model\]" | cut -c1-150
done
