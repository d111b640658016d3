#!/usr/bin/env bash
# session 29 run 7 (branch idot-prefetch-words): GPU tests of the one-row MLX kernels, then prefetch A/B
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run7; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 150 python3 -m pytest tests/ops/test_quant.py -q -p no:cacheprovider -n 12 -k "affine or idot or tensor_core or x_views" > $R/tests.log 2>&1
tail -2 $R/tests.log
timeout 200 python3 bench/results/2026-11-28-session29/idot_prefetch_ab.py $R/ab.json 2>&1 | tee $R/ab.log | grep -v "^$"
tar -czf $OUT/run7.tgz -C /tmp run7
