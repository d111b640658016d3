#!/usr/bin/env bash
# Session 42 run 4: Nsight Compute on MLX 4-bit decode, 4096 x 14336: one row (affine_idot_kernel) against 2 / 16 rows
# (mmv_kernel): occupancy, scheduler, warp stall reasons, memory, the top stall lines of the SASS.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
D=bench/results/2026-11-29-session42
NCU="ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats
  --section WarpStateStats --section MemoryWorkloadAnalysis --section SourceCounters --launch-skip 4 --launch-count 1"
for spec in "1 affine_idot_kernel" "2 mmv_kernel" "16 mmv_kernel"; do
  set -- $spec
  timeout 150 $NCU -k regex:$2 python3 $D/ncu_mv.py $1 > $OUT/ncu_m$1.txt 2>&1
  echo "M$1 rc $?"; grep -E "Duration|Achieved Occupancy|Theoretical Occupancy|Registers Per|Eligible Warps|Issued Warp|No Eligible|Warp Cycles Per Issued|DRAM Throughput|Memory Throughput|Block Limit|Grid Size|Block Size|Dynamic Shared|Static Shared|Waves" $OUT/ncu_m$1.txt | head -40
done
