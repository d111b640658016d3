#!/usr/bin/env bash
# Session 42 run 6: grid balance of the MLX 4-bit decode (grid_balance.py), default and PPS=4.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
D=bench/results/2026-11-29-session42
for pps in 2 4 3; do timeout 100 python3 $D/grid_balance.py $pps 2>&1 | tee -a $OUT/grid_balance.log; done
