#!/usr/bin/env bash
# session 26 run 6: the Q8_0 one-row knobs on SmolLM2's head (576 x 49152, one 8-pair step and a 1-pair partial one)
# and two other short-row shapes
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
R=/tmp/run6; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 200 python3 bench/gguf_mv_sweep.py --types Q8_0 --grid "Q8_BN=4,8,16,32;Q8_WPL=1,2;PROGRAMS_PER_SM=1,2" \
  --shapes 576x49152,576x1536,1536x576 --out $R/q8_short.json > $R/q8_short.log 2>&1
grep -E "M1 K" $R/q8_short.log | grep -v GGUF_MV=0
tar -czf $OUT/run6.tgz -C /tmp run6
