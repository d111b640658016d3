#!/usr/bin/env bash
# Session 42 run 5: Nsight Compute warp stall reasons of mmv_kernel (MLX 4-bit, 4096 x 14336, 2 rows of x) and the
# per-instruction SASS stall samples (source page).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
D=bench/results/2026-11-29-session42
S=""
for r in long_scoreboard short_scoreboard barrier wait mio_throttle math_pipe_throttle not_selected selected \
         dispatch_stall lg_throttle membar drain no_instruction imc_miss branch_resolving sleeping tex_throttle; do
  S="$S,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
timeout 150 ncu --clock-control none --metrics ${S#,} -k regex:mmv_kernel --launch-skip 4 --launch-count 1 \
  python3 $D/ncu_mv.py 2 > $OUT/stalls_m2.txt 2>&1; echo "stalls rc $?"; grep -E "stalled" $OUT/stalls_m2.txt
timeout 150 ncu --clock-control none --section SourceCounters --section WarpStateStats -k regex:mmv_kernel \
  --launch-skip 4 --launch-count 1 --page source --print-source sass --csv python3 $D/ncu_mv.py 2 \
  > $OUT/source_m2.csv 2>&1; echo "source rc $?"; wc -l $OUT/source_m2.csv; head -3 $OUT/source_m2.csv | cut -c1-600
