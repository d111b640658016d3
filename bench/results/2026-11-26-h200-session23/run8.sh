#!/usr/bin/env bash
# session 23 run 8: SmolLM2-shaped decode, word-level mat-vec knob variants (after gemv became a PDL dependent)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl_gguf/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
for round in 1 2; do
  for v in base 'GEMV_WARPS=2' 'GEMV_WARPS=1' 'GEMV_WORDS=64' 'GEMV_BNS=(16,8,4,2);TILES_PER_SM=4' \
           'GEMV_BNS=(16,8)' 'GEMV_WARPS=2;GEMV_BNS=(16,8,4,2);TILES_PER_SM=4' 'TILES_PER_SM=1' fused_mlp; do
    if [ "$v" = fused_mlp ]; then extra=--fused-mlp; arg=base; else extra=; arg=$v; fi
    timeout 45 python3 $(dirname $0)/smollm2_gemv_sweep.py "$arg" --out /tmp/sw --only smollm2 --skip-hf \
      --skip-compiled $extra > /tmp/sw.log 2>&1 || cp /tmp/sw.log $OUT/failed_$round.log
    echo "$v round $round: $(grep -h 'mlx-native.*tg' /tmp/sw.log | sed 's/.*mlx-native//' | tr '\n' ' ')"
  done
done | tee $OUT/sweep.log
