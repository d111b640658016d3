#!/usr/bin/env bash
# session 25 run 7: 8-warp steps of the Q4_0 / Q4_1 integer-dot kernel (and the MLX whole-row steps): GPU tests, then
# the 8B-shaped decode, main's package (build/snap_main) against the tree and the tree with Q4_0 gate/up pairs on
# 2-warp steps, two alternated rounds
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
D=bench/results/2026-11-26-session25
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
PYTHONPATH=/tmp/site:$PWD/src timeout 150 python3 -m pytest tests/ops/test_ggml_q4_idot.py tests/ops/test_ggml_handoff.py \
  tests/ops/test_ggml.py -q -p no:cacheprovider -n 12 > $OUT/pytest.log 2>&1
tail -2 $OUT/pytest.log
A="--only llama8b --kinds-8b gguf-Q4_0,mlx-affine-4bit-g64 --skip-hf --skip-compiled"
for round in 1 2; do for v in main whole q4glu2; do
  if [ $v = main ]; then
    PYTHONPATH=/tmp/site:$PWD/build/snap_main timeout 70 python3 bench/model.py --out /tmp/$v$round $A > $OUT/$v$round.log 2>&1
  else
    PYTHONPATH=/tmp/site:$PWD/src timeout 70 python3 $D/tile_variant.py $v --out /tmp/$v$round $A > $OUT/$v$round.log 2>&1
  fi
  echo "== $v round $round"; grep -E '^\[model\] 8B.*tg' $OUT/$v$round.log | sed 's/, floor.*(/ (/'
done; done
