#!/usr/bin/env bash
# Run 3: decode-attention merge variants in the model runner (model_variant.py). Carry [".whl"].
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
D=bench/results/2026-11-29-session46
go() {  # name timeout variant args...
  local name=$1 t=$2 v=$3; shift 3
  timeout $t python3 $D/model_variant.py $v --out $OUT/$name --reps 3 "$@" > $OUT/$name.log 2>&1
  echo "$name rc $?"; grep "tok/s" $OUT/$name.log | grep "^\[model\]" | cut -c1-160
}
Q="--only llama8b --arch qwen3-30b-a3b --layers-8b 12"
for v in default fused reduce_trigger fused_trigger; do
  go qwen_$v 60 $v $Q --kinds-8b mlx-affine-4bit-g64,gguf-Q4_K
done
for v in default fused reduce_trigger; do
  go llama_$v 50 $v --only llama8b --kinds-8b mlx-affine-4bit-g64
  go smollm2_$v 70 $v --only smollm2 --skip-hf --skip-compiled
done
for v in default fused reduce_trigger; do
  go qwen8k_$v 80 $v $Q --kinds-8b mlx-affine-4bit-g64 --n-prompt 8192
done
