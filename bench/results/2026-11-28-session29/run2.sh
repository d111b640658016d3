#!/usr/bin/env bash
# session 29 run 2: balance probe (mmv_kernel at N giving 3 / 3.39 / 4 / 5 programs per SM; nested-loop shares)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl_gguf/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run2; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 300 python3 bench/results/2026-11-28-session29/balance_probe.py $R/probe.json 2>&1 | tee $R/probe.log
tar -czf $OUT/run2.tgz -C /tmp run2
