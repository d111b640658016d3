#!/usr/bin/env bash
# session 29 run 4 (branch x-ahead): x two steps ahead / scale pairs a step ahead, packed MLX and Q4_K tiles
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl_gguf/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run4; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 400 python3 bench/results/2026-11-28-session29/ahead_ab.py $R/ab.json > $R/ab.log 2>&1
grep -E "MISMATCH|Error" $R/ab.log | head
grep -E "K4096   N14336|MISMATCH" $R/ab.log
tar -czf $OUT/run4.tgz -C /tmp run4
