#!/usr/bin/env bash
# Session 42 run 8: the read ceilings of the MoE decode step's gate/up and down phases (moe_read.py).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
timeout 200 python3 bench/results/2026-11-29-session42/moe_read.py 2>&1 | tee $OUT/moe_read.log
