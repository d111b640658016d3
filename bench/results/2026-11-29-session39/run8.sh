#!/usr/bin/env bash
# issue 3's B8 kv32k read pattern: pointer loads (cp.async) against TMA descriptor loads (read_tma.py)
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/bench
R=/tmp/run8; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 300 python3 bench/results/2026-11-29-session39/read_tma.py $R/read_tma.json > $R/read_tma.log 2>&1
echo "rc $?"; cut -c1-160 $R/read_tma.log | tail -20
tar -czf $OUT/run8.tgz -C /tmp run8
