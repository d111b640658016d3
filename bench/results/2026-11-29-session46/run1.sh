#!/usr/bin/env bash
# Run 1: the router handoff (branch router-handoff-46) against main (.old), and the decode-attention merge fused
# in the model. Carry [".whl", ".old"].
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
D=bench/results/2026-11-29-session46
PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench timeout 150 python3 -m pytest tests/ops/test_moe.py tests/models/test_moe_checkpoints.py \
  -k "handoff or router or ffn or gpu" -p no:cacheprovider -n 12 -q --tb=short > $OUT/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $OUT/tests.log | cut -c1-240 | tail -8
ARGS="--only llama8b --arch qwen3-30b-a3b --layers-8b 12 --kinds-8b mlx-affine-4bit-g64,gguf-Q4_K --reps 3"
for v in old:default new:default new:fused; do
  tree=${v%%:*}; merge=${v##*:}
  pp=$PWD/src; [ $tree = old ] && pp=$PWD/.old/src
  PYTHONPATH=/tmp/site:$pp:$PWD/bench timeout 110 python3 $D/model_variant.py $merge --out $OUT/model_${tree}_$merge \
    $ARGS > $OUT/model_${tree}_$merge.log 2>&1
  echo "model $v rc $?"; grep "tok/s" $OUT/model_${tree}_$merge.log | grep "^\[model\]" | cut -c1-200
done
