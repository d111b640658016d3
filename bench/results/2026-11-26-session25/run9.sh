#!/usr/bin/env bash
# session 25 run 9: one-row Q4_0 / Q4_1 matrices of fewer row tiles than SMs on the streamed kernels: GPU tests, then
# the SmolLM2-shaped (synthetic Q4_1) decode with the word-level kernel for them (MIN_TILES_PER_SM=1) and without
# (the tree), two alternated rounds
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
D=bench/results/2026-11-26-session25
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 200 python3 -m pytest tests/ops/test_ggml.py tests/ops/test_ggml_handoff.py tests/ops/test_ggml_q4_rows.py \
  tests/models/test_norm_handoff.py tests/ops/test_ggml_q4_idot.py -q -p no:cacheprovider -n 12 > $OUT/pytest.log 2>&1
tail -2 $OUT/pytest.log
A="--only smollm2 --skip-hf --skip-compiled"
for round in 1 2; do for v in 1 0; do
  K=""; [ $v = 1 ] && K="mlx_native.ops.ggml.q4_mv.MIN_TILES_PER_SM=1"
  timeout 100 python3 $D/knob_variant.py $K -- --out /tmp/m$v$round $A > $OUT/min$v$round.log 2>&1
  echo "== MIN_TILES_PER_SM=$v round $round"; grep -E '^\[model\].*tg|tok/s' $OUT/min$v$round.log | head -3
done; done
