#!/usr/bin/env bash
# Session 42 run 10: the MoE gate/up launch's waves (moe_regs.py): register caps and one-warp programs, twice each.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
S=bench/results/2026-11-29-session42/moe_regs.py
for r in 1 2; do for v in "0 0" "80 0" "72 0" "0 1" "64 1"; do timeout 60 python3 $S $v 2>&1 | tee -a $OUT/moe_regs.log; done; done
