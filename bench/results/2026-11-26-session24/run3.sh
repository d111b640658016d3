#!/usr/bin/env bash
# session 24 run 3: handoff tests (fixed oracle), then per-launch cost of the handoff (late parts sum = this tree,
# early = the branch before), 8B shapes
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
D=bench/results/2026-11-26-session24
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 120 python3 -m pytest tests/ops/test_ggml_handoff.py tests/models/test_norm_handoff.py tests/ops/test_quant.py -k handoff -q -p no:cacheprovider -n 8 > $OUT/pytest.log 2>&1
tail -3 $OUT/pytest.log
echo "== late"; timeout 200 python3 $D/handoff_parts.py 2>&1 | tee $OUT/parts_late.log
cp -r $D/early_src/src . && echo "== early" && timeout 200 python3 $D/handoff_parts.py 2>&1 | tee $OUT/parts_early.log
cp -r $D/late_src/src .
