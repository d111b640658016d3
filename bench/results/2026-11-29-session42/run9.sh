#!/usr/bin/env bash
# Session 42 run 9: maxnreg caps x mmv splits (maxnreg_sweep.py); one process a config.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
S=bench/results/2026-11-29-session42/maxnreg_sweep.py
for cap in 0 96 80; do timeout 60 python3 $S $cap affine_idot_kernel 0 2>&1 | tee -a $OUT/maxnreg.log; done
for split in 0 8; do for cap in 0 80 64; do
  timeout 60 python3 $S $cap mmv_kernel $split 2>&1 | tee -a $OUT/maxnreg.log; done; done
