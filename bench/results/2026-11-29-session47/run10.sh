#!/usr/bin/env bash
# Session 47 run 10: batch-1 prefill chunks replayed from a CUDA graph (prefill_graph.py). carry [".whl"].
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/gguf*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
timeout 150 python3 bench/results/2026-11-29-session47/prefill_graph.py --lengths 128,512,2048 > $OUT/prefill_graph.log 2>&1
echo "rc $?"; grep -E "^\[graph\]|Error|error" $OUT/prefill_graph.log | cut -c1-300 | tail -12
