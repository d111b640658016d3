#!/usr/bin/env bash
# Session 41 run 6 (branch moe-mv-knobs): the routed GGUF Q6_K / Q8_0 decode kernel per projection over warps and rows
# a program (moe_mv_sweep.py), then its knob test on CUDA. Logs straight to $OUT (the session's last device seconds).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 170 python3 bench/results/2026-11-29-session41/moe_mv_sweep.py > $OUT/moe_mv_sweep.log 2>&1
echo "sweep rc $?"; cat $OUT/moe_mv_sweep.log
timeout 60 python3 -m pytest tests/ops/test_moe.py -v -p no:cacheprovider -n 4 --tb=short -k "gguf_mv_knobs" \
  > $OUT/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $OUT/tests.log | cut -c1-200 | tail -8
