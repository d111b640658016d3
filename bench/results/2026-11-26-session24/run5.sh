#!/usr/bin/env bash
# session 24 run 5 (branch weights-first): first weights before griddepcontrol.wait, A/B per launch and in the
# 8B-shaped decode (two alternated rounds), plus the GPU tests of the three kernels
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl_gguf/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
D=bench/results/2026-11-26-session24
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 150 python3 $D/wfirst_mv.py 2>&1 | tee $OUT/wfirst_mv.log
A="--only llama8b --kinds-8b gguf-Q4_K,gguf-Q4_0,mlx-affine-4bit-g64 --skip-hf --skip-compiled"
for round in 1 2; do for v in 0 1; do
  timeout 70 python3 $D/wfirst_model.py $v --out /tmp/m$v$round $A > $OUT/model$v$round.log 2>&1
  echo "== W=$v round $round"; grep -E '^\[model\] 8B.*tg' $OUT/model$v$round.log | sed 's/, floor.*(/ (/'
done; done
