#!/usr/bin/env bash
# Prepared in session 46 (not run): branch decode-head-norm. Trees: .old = main's src (with bench -d),
# .mid = branch weights-l2-prefetch (norm / head-norm-rope weights asked of L2 before griddepcontrol.wait),
# src = decode-head-norm (Qwen3 / Gemma 3 q/k norms in the decode attention launch, their weights prefetched too).
# Before running:  for t in old:main mid:weights-l2-prefetch; do rm -rf .${t%%:*}; mkdir .${t%%:*};
#   git archive ${t##*:} src | tar -x -C .${t%%:*}; done   (.old / .mid in .git/info/exclude)
# carry [".whl", ".old", ".mid"]. Part A: CUDA tests and the Qwen3-30B-A3B-shaped rows (~6 min).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
timeout 150 env PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench python3 -m pytest tests/ops/test_attention.py \
  tests/ops/test_norms.py tests/ops/test_rope.py -k "append or head_norm or gpu or decode" -p no:cacheprovider -n 12 \
  -q --tb=short > $OUT/tests_ops.log 2>&1
echo "op tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $OUT/tests_ops.log | cut -c1-220 | tail -6
timeout 120 env PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench python3 -m pytest tests/models -m gpu -p no:cacheprovider \
  -n 12 -q --tb=short > $OUT/tests_models.log 2>&1
echo "model tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $OUT/tests_models.log | cut -c1-220 | tail -6
ARGS="--only llama8b --arch qwen3-30b-a3b --layers-8b 12 --kinds-8b mlx-affine-4bit-g64,gguf-Q4_K --reps 3"
for d in 0 1024; do
  for tree in old mid new; do
    pp=$PWD/src; [ $tree != new ] && pp=$PWD/.$tree/src
    timeout 70 env PYTHONPATH=/tmp/site:$pp:$PWD/bench python3 bench/model.py --out $OUT/qwen_d${d}_$tree $ARGS \
      --n-depth $d > $OUT/qwen_d${d}_$tree.log 2>&1
    echo "qwen d$d $tree rc $?"; grep "tok/s" $OUT/qwen_d${d}_$tree.log | grep "^\[model\]" | cut -c1-170
  done
done
