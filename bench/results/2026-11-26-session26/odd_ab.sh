#!/usr/bin/env bash
# For the next session (branch odd-partial-step, NOT yet run on a GPU): MLX 3/5/6-bit one-row routes with partial
# last steps against main's package (put main's package at build/snap_main: git archive main src/mlx_native | tar -x
# -C build/snap_main), two rounds, then the GPU tests of affine_mv_odd.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
R=/tmp/odd_ab; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
S="--bits 3,5,6 --shapes 11008x4096,18944x3584,5376x4096,8960x1536,2560x9728,4096x14336"
for round in 1 2; do for v in main new; do
  if [ $v = main ]; then P=$PWD/build/snap_main/src; else P=$PWD/src; fi
  PYTHONPATH=/tmp/site:$P timeout 120 python3 bench/odd_bits_sweep.py --routes $S --out $R/$v$round.json > $R/$v$round.log 2>&1
  echo "== $v $round"; grep -iE "default" $R/$v$round.log
done; done
PYTHONPATH=/tmp/site:$PWD/src timeout 150 python3 -m pytest tests/ops/test_quant_odd_bits.py -q -p no:cacheprovider -n 8 \
  > $R/pytest.log 2>&1; tail -2 $R/pytest.log
tar -czf $OUT/odd_ab.tgz -C /tmp odd_ab
