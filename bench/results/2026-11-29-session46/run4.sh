#!/usr/bin/env bash
# Run 4: the fused merge loading its splits in chunks: decode tests on CUDA, the merge sweep (model-shaped and
# B1 Hkv8 attention), the Qwen3-30B-A3B-shaped decode at depths 0 / 1024 / 4096 with the merge fused or by the
# PDL reduce launch. Carry [".whl"].
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
D=bench/results/2026-11-29-session46
timeout 120 python3 -m pytest tests/ops/test_attention.py -k "decode or merge or fused" -p no:cacheprovider -n 8 -q \
  --tb=short > $OUT/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $OUT/tests.log | cut -c1-200 | tail -6
timeout 150 python3 bench/decode_merge_sweep.py --quick \
  --shapes "Hkv4 ,B1 Hq64 Hkv8 kv8192 D128,B1 Hq64 Hkv8 kv32768 D128,B8 Hq64 Hkv8 kv8192 D128" \
  --out $OUT/merge_sweep.json > $OUT/merge_sweep.log 2>&1
echo "sweep rc $?"; grep -v '^{' $OUT/merge_sweep.log | grep -v Warn | tail -36
for d in 0 1024 4096; do
  for v in default fused; do
    timeout 60 python3 $D/model_variant.py $v --out $OUT/qwen_d${d}_$v --reps 3 --only llama8b --arch qwen3-30b-a3b \
      --layers-8b 12 --kinds-8b mlx-affine-4bit-g64 --n-depth $d > $OUT/qwen_d${d}_$v.log 2>&1
    echo "d$d $v rc $?"; grep "tok/s" $OUT/qwen_d${d}_$v.log | grep "^\[model\]" | cut -c1-170
  done
done
