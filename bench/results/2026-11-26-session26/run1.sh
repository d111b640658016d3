#!/usr/bin/env bash
# session 26 run 1: (a) branch q4-partial-step against main, Q4_0 / Q4_1 one-row default routes; (b) how much the
# streamed Q6_K / Q5_K / Q8_0 kernels lose with the small loop steps that rows of K = 11008 get (step knob swept on
# K = 4096 / 14336 rows, where larger steps divide the row)
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
S="--shapes 11008x4096,5376x4096,4096x14336,4096x4096"
for v in main q4p main q4p; do
  PYTHONPATH=$PWD/build/snap_$v/src timeout 100 python3 bench/gguf_mv_sweep.py --types Q4_0,Q4_1 \
    --grid "Q4I_BN=8" $S > $OUT/q4_$v.log 2>&1
  echo "== $v"; grep -E "\(default\)" $OUT/q4_$v.log
done
export PYTHONPATH=$PWD/src
S="--shapes 4096x14336,14336x4096,11008x4096"
timeout 100 python3 bench/gguf_mv_sweep.py --types Q6_K --grid "Q6K_MAX_SBS=1,2,4" $S > $OUT/q6k.log 2>&1
timeout 100 python3 bench/gguf_mv_sweep.py --types Q5_K --grid "Q5K_MAX_WPS=32,64,128" $S > $OUT/q5k.log 2>&1
timeout 100 python3 bench/gguf_mv_sweep.py --types Q8_0 --grid "Q8_MAX_UPS=64,128,256" $S > $OUT/q8.log 2>&1
grep -hE "M1 K" $OUT/q6k.log $OUT/q5k.log $OUT/q8.log
