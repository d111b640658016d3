#!/usr/bin/env bash
# Run 6: run 5 with the new K rows normed after the cache tiles (their loads not waited for before the loop) (flash_attn_decode(head_norm=)): attention and model
# tests on CUDA; the Qwen3-30B-A3B-shaped decode against the tree before it (.old = HEAD's src), at depths 0 and
# 1024, and the new tree's eager profile. Carry [".whl", ".old"].
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
timeout 60 env PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench python3 -m pytest tests/ops/test_attention.py \
  -k "append or head_norm" -p no:cacheprovider -n 12 -q --tb=short > $OUT/tests_attention.log 2>&1
echo "attention tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $OUT/tests_attention.log | cut -c1-220 | tail -6
timeout 200 env PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench python3 -m pytest tests/models -m gpu -k "qwen or gemma or moe or Qwen or Gemma" -p no:cacheprovider \
  -n 12 -q --tb=short > $OUT/tests_models.log 2>&1
echo "model tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $OUT/tests_models.log | cut -c1-220 | tail -8
ARGS="--only llama8b --arch qwen3-30b-a3b --layers-8b 12 --kinds-8b mlx-affine-4bit-g64,gguf-Q4_K --reps 3"
for d in 0 1024; do
  for tree in old new; do
    pp=$PWD/src; [ $tree = old ] && pp=$PWD/.old/src
    timeout 70 env PYTHONPATH=/tmp/site:$pp:$PWD/bench python3 bench/model.py --out $OUT/qwen_d${d}_$tree $ARGS \
      --n-depth $d > $OUT/qwen_d${d}_$tree.log 2>&1
    echo "d$d $tree rc $?"; grep "tok/s" $OUT/qwen_d${d}_$tree.log | grep "^\[model\]" | cut -c1-170
  done
done
timeout 70 env PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench python3 bench/model.py --out $OUT/prof_new --only llama8b \
  --arch qwen3-30b-a3b --layers-8b 12 --kinds-8b mlx-affine-4bit-g64 --reps 1 --profile > $OUT/prof_new.log 2>&1
echo "profile rc $?"; grep "^\[model\]" $OUT/prof_new.log | cut -c1-120
