#!/usr/bin/env bash
# Run 2: eager kernel profiles of the Qwen3-30B-A3B-shaped decode, main (.old) against the router handoff; the
# decode merge modes on the model's attention shapes. Carry [".whl", ".old"].
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
D=bench/results/2026-11-29-session46
ARGS="--only llama8b --arch qwen3-30b-a3b --layers-8b 12 --kinds-8b mlx-affine-4bit-g64,gguf-Q4_K --reps 1 --profile"
for tree in old new; do
  pp=$PWD/src; [ $tree = old ] && pp=$PWD/.old/src
  PYTHONPATH=/tmp/site:$pp:$PWD/bench timeout 120 python3 bench/model.py --out $OUT/prof_$tree $ARGS > $OUT/prof_$tree.log 2>&1
  echo "profile $tree rc $?"; grep "^\[model\]" $OUT/prof_$tree.log | cut -c1-160
done
PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench timeout 200 python3 bench/decode_merge_sweep.py --quick --shapes "Hkv4 " \
  --out $OUT/merge_sweep.json > $OUT/merge_sweep.log 2>&1
echo "sweep rc $?"; grep -v '^{' $OUT/merge_sweep.log | tail -40
