#!/usr/bin/env bash
# session 24 run 10 (branch pdl-tail): GPU tests of the dependent argmax / embedding lookups / position counters,
# then SmolLM2-shaped and 8B-shaped decode with the tail as dependents or plain launches (two alternated rounds)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
D=bench/results/2026-11-26-session24
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 200 python3 -m pytest tests/runtime tests/ops/test_sampling.py tests/models/test_architectures.py \
  tests/models/test_norm_handoff.py -q -p no:cacheprovider -n 12 > $OUT/pytest.log 2>&1
tail -3 $OUT/pytest.log
A="--kinds-8b gguf-Q4_K,mlx-affine-4bit-g64 --skip-hf --skip-compiled"
for round in 1 2; do for v in pdl plain; do
  timeout 90 python3 $D/tail_variant.py $v --out /tmp/$v$round $A > $OUT/$v$round.log 2>&1
  echo "== $v round $round"; grep -E '^\[model\] .*tg' $OUT/$v$round.log | sed 's/, floor.*(/ (/'
done; done
