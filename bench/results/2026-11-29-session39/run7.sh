#!/usr/bin/env bash
# GGUF Q6_K / Q8_0 / Q5_K at 5-16 rows of x: the tiled decode kernel (today's route) against 4-row slices on the
# streamed kernels and against dequantize + cuBLAS (gguf_rows_slices.py)
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/bench
R=/tmp/run7; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 400 python3 bench/results/2026-11-29-session39/gguf_rows_slices.py > $R/gguf_rows_slices.log 2>&1
echo "rc $?"; cut -c1-160 $R/gguf_rows_slices.log | head -50
tar -czf $OUT/run7.tgz -C /tmp run7
