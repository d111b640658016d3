#!/usr/bin/env bash
# session 32 run 2: read_rebalance.py (the pair of a column settles its middle once, by compare-and-swap)
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
R=/tmp/run2; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 200 python3 bench/results/2026-11-28-session32/read_rebalance.py $R/read_rebalance.json > $R/read_rebalance.log 2>&1
echo "rc $?"; tail -20 $R/read_rebalance.log
tar -czf $OUT/run2.tgz -C /tmp run2
