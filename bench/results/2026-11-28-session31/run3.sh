#!/usr/bin/env bash
# session 31 run 3: the MLX 2-4-row integer-dot kernel (with session 30's pinned prefetch) against the packed
# tensor-core tiles that take 3+ rows, and 2 rows from 2^25 weights (bench/affine_mv_sweep.py --rows)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 420 python3 bench/affine_mv_sweep.py --rows 2,3,4 --shapes 4096x14336,14336x4096,4096x4096 --out $R/rows_sweep.json > $R/rows_sweep.log 2>&1
echo "sweep rc $?"; grep -E "BEST|default route|mmv\)" $R/rows_sweep.log
tar -czf $OUT/run3.tgz -C /tmp run3
