#!/usr/bin/env bash
# session 26 run 4: Llama-2-7B-shaped decode (4 layers + 32000-vocab head; the down projections have K = 11008) with
# MLX 4-bit, Q4_0, Q4_K and Q8_0 weights: main's package (build/snap_main) against the tree, two alternated rounds
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
R=/tmp/run4; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
A="--only llama8b --arch llama2-7b --kinds-8b mlx-affine-4bit-g64,gguf-Q4_0,gguf-Q4_K,gguf-Q8_0 --skip-hf --skip-compiled"
for round in 1 2; do for v in main new; do
  if [ $v = main ]; then P=$PWD/build/snap_main/src; else P=$PWD/src; fi
  PYTHONPATH=/tmp/site:$P timeout 120 python3 bench/model.py --out $R/$v$round $A > $R/$v$round.log 2>&1
  echo "== $v round $round"; grep -E '^\[model\] .*tg' $R/$v$round.log | sed 's/, floor.*(/ (/'
done; done
tar -czf $OUT/run4.tgz -C /tmp run4
