#!/usr/bin/env bash
# session 25 run 5: whole-row steps of the one-row MLX integer-dot kernel: GPU tests, then the 8B-shaped MLX decode
# with main's tiles / whole-row steps / whole-row steps except gate/up pairs (two alternated rounds)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
D=bench/results/2026-11-26-session25
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 200 python3 -m pytest tests/ops/test_quant.py tests/models/test_norm_handoff.py tests/ops/test_moe.py -q \
  -p no:cacheprovider -n 12 > $OUT/pytest.log 2>&1
tail -3 $OUT/pytest.log
A="--only llama8b --kinds-8b mlx-affine-4bit-g64 --skip-hf --skip-compiled"
for round in 1 2; do for v in old whole whole-noglu; do
  timeout 60 python3 $D/tile_variant.py $v --out /tmp/$v$round $A > $OUT/$v$round.log 2>&1
  echo "== $v round $round"; grep -E '^\[model\] 8B.*tg' $OUT/$v$round.log | sed 's/, floor.*(/ (/'
done; done
