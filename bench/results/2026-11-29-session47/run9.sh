#!/usr/bin/env bash
# Session 47 run 9: cProfile of SmolLM2-shaped pp512 / pp32 host issue on CUDA. carry [".whl"].
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/gguf*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
for n in 512 32; do
  timeout 150 python3 bench/results/2026-11-29-session47/prefill_host_profile.py $n > $OUT/host_pp$n.log 2>&1
  echo "pp$n rc $?"; grep "^\[host\] pp" $OUT/host_pp$n.log
done
grep -A48 "by tottime" $OUT/host_pp512.log | cut -c1-150 | grep -v "^$"
