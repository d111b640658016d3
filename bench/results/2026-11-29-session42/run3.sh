#!/usr/bin/env bash
# Session 42 run 3: KV cache layouts for split-KV decode (kv_layout.py) and the MoE decode step's phases (moe_phases.py).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
D=bench/results/2026-11-29-session42
timeout 200 python3 $D/kv_layout.py > $OUT/kv_layout.log 2>&1; echo "kv_layout rc $?"; cat $OUT/kv_layout.log
timeout 200 python3 $D/moe_phases.py > $OUT/moe_phases.log 2>&1; echo "moe_phases rc $?"; cat $OUT/moe_phases.log
