#!/usr/bin/env bash
# session 24 run 2 (branch gguf-handoff + consumers sum the parts after their loop): GPU tests of the hand-off,
# then the 8B-shaped A/B: hand-off with late parts sum (this tree), norm launches, and the early sum (patch -R)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
D=bench/results/2026-11-26-session24
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 300 python3 -m pytest tests/ops/test_ggml_handoff.py tests/models/test_norm_handoff.py tests/ops/test_ggml.py \
  tests/ops/test_ggml_q4_idot.py tests/ops/test_quant.py tests/runtime/test_dependent.py -q -p no:cacheprovider -n 12 > $OUT/pytest.log 2>&1
tail -3 $OUT/pytest.log
M="python3 bench/model.py --only llama8b --kinds-8b gguf-Q4_K,gguf-Q4_0,mlx-affine-4bit-g64 --skip-hf --skip-compiled"
timeout 120 $M --out /tmp/late --fused-attn --profile > $OUT/model_late.log 2>&1
cp -r $D/early_src/src . && timeout 100 $M --out /tmp/early --profile > $OUT/model_early.log 2>&1
cp -r $D/late_src/src . && timeout 100 $M --out /tmp/late2 > $OUT/model_late2.log 2>&1
for f in late early late2; do echo "== $f"; grep -E '^\[model\] 8B.*tg' $OUT/model_$f.log | sed 's/, floor.*(/ (/'; done
tar czf $OUT/results.tar.gz -C /tmp late early late2 2>/dev/null
