#!/usr/bin/env bash
# session 24 run 4 (H100): 8B-shaped decode, norm handoff to all consumers / to q/k/v only / none (norm launches),
# two alternated rounds
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl_gguf/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
D=bench/results/2026-11-26-session24
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
A="--only llama8b --kinds-8b gguf-Q4_K,gguf-Q4_0,mlx-affine-4bit-g64 --skip-hf --skip-compiled"
for round in 1 2; do
  timeout 100 python3 $D/handoff_variant.py all --out /tmp/all$round $A --fused-attn > $OUT/all$round.log 2>&1
  timeout 70 python3 $D/handoff_variant.py qkv_only --out /tmp/qkv$round $A > $OUT/qkv$round.log 2>&1
done
for f in all1 qkv1 all2 qkv2; do echo "== $f"; grep -E '^\[model\] 8B.*tg' $OUT/$f.log | grep -v unfused | sed 's/, floor.*(/ (/'; done
