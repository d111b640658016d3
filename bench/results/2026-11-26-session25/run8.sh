#!/usr/bin/env bash
# session 25 run 8: GGUF one-row mat-vecs of fewer row tiles than SMs (word-level kernel now) on the streamed kernels
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 300 python3 bench/results/2026-11-26-session25/few_tiles_probe.py 2>&1 | tee $OUT/few_tiles.log
