#!/usr/bin/env bash
# session 24 run 7 (branch gguf-glu, Q4_0 GLU offsets folded): GPU tests of the GGUF gate/up + activation launch, then the 8B-shaped GGUF
# decode with and without it (two alternated rounds)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
D=bench/results/2026-11-26-session24
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 120 python3 -m pytest tests/ops/test_ggml_handoff.py tests/models/test_norm_handoff.py -q \
  -p no:cacheprovider -n 12 > $OUT/pytest.log 2>&1
tail -3 $OUT/pytest.log
A="--only llama8b --kinds-8b gguf-Q4_K,gguf-Q4_0 --skip-hf --skip-compiled"
for round in 1 2; do for v in glu noglu; do
  timeout 60 python3 $D/glu_variant.py $v --out /tmp/$v$round $A $([ $round = 1 ] && echo --profile) > $OUT/$v$round.log 2>&1
  echo "== $v round $round"; grep -E '^\[model\] 8B.*tg|kernels,' $OUT/$v$round.log | sed 's/, floor.*(/ (/'
done; done
