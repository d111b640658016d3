#!/usr/bin/env bash
# Session 47 run 5: issue 3's B8 kv32k decode on the H200 in interleaved rounds, stream-K tile configs / program
# counts against cuDNN, flash and the linear read (b8_stream_configs.py). carry [".whl"] (not needed by this one).
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/bench
nvidia-smi --query-gpu=name,clocks.max.memory --format=csv,noheader
timeout 400 python3 bench/results/2026-11-29-session47/b8_stream_configs.py 2>&1 | tee $OUT/b8_stream_configs.log \
  | grep -E "b8cfg|Error|error" | cut -c1-200
