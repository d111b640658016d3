#!/usr/bin/env bash
# session 29 run 1: equal shares (quant/mmv_shares.py) against tiles x K splits, 2-16 rows, programs per SM 3-5
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl_gguf/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 420 python3 bench/results/2026-11-28-session29/shares_ab.py $R/ab.json > $R/ab.log 2>&1
grep -E "MISMATCH|Error|error" $R/ab.log | head
grep -E "M(2|16) " $R/ab.log
tar -czf $OUT/run1.tgz -C /tmp run1
