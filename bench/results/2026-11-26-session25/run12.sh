#!/usr/bin/env bash
# session 25 run 12: MLX one-row rows of no whole step (a partial last step) and long rows of few tiles (8 warps) on the
# integer-dot kernel by default: GPU tests, then the default routes on those shapes and the 8B ones
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 240 python3 -m pytest tests/ops/test_quant.py tests/ops/test_moe.py tests/models/test_norm_handoff.py -q \
  -p no:cacheprovider -n 12 > $OUT/pytest.log 2>&1
tail -2 $OUT/pytest.log
timeout 200 python3 bench/affine_mv_sweep.py --kernel none \
  --shapes 11008x4096,5376x4096,2880x2880,1536x576,14336x1024,4096x4096,4096x14336,14336x4096,4096x1024 \
  --out $OUT/routes.json > $OUT/routes.log 2>&1
grep -E "^K .*default route|^K .*AFFINE_IDOT=0" $OUT/routes.log
