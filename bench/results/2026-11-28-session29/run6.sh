#!/usr/bin/env bash
# session 29 run 6 (branch x-raw): the packed tiles' dots as mma.sync (DISABLE_MMA_V3=1, Triton's switch; x and the
# tiles from registers, no wgmma wait) against wgmma, default route of MLX / Q4_K at 2-16 rows, two rounds
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run6; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
for round in 1 2; do
  for mode in v3 v2; do
    if [ $mode = v2 ]; then export DISABLE_MMA_V3=1 TRITON_CACHE_DIR=/tmp/tc_v2; else unset DISABLE_MMA_V3; export TRITON_CACHE_DIR=/tmp/tc_v3; fi
    timeout 100 python3 bench/results/2026-11-28-session29/xwords_ab.py $R/${mode}_$round.json > $R/${mode}_$round.log 2>&1
    echo "== $mode round $round"; grep -E "default route" $R/${mode}_$round.log | awk '{print $1, $2, $3, $4, $(NF-3)}' | tr '\n' ';'; echo
  done
done
tar -czf $OUT/run6.tgz -C /tmp run6
