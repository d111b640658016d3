#!/usr/bin/env bash
# session 28 run 2: Nsight Compute on the packed Q4_0 (branch q40-packed) and Q4_1 tiles at 16 rows: why they take
# 60-75 us where MLX and Q4_K tiles take 22-25 (session 25 run 1 has the MLX / Q4_K profiles)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats --section ComputeWorkloadAnalysis --section SourceCounters"
P=scripts/ncu_decode_matmul.py
for spec in "Q4_0 16" "Q4_1 16" "affine 16"; do
  set -- $spec
  timeout 120 ncu --clock-control none --kernel-name regex:mmv_kernel --launch-skip 3 --launch-count 1 $S \
    python3 $P --format $1 --m $2 --k 4096 --n 14336 --mmv on > $OUT/ncu_$1_m$2.txt 2>&1
  echo "== $spec rc=$?"; grep -E "Duration|DRAM Throughput|Issue Slots Busy|Registers Per|Achieved Occupancy|Theoretical Occ|Warp Cycles Per Issued|Block Limit Reg|Block Limit Shared|Dynamic Shared|Executed Instructions  |Stall" $OUT/ncu_$1_m$2.txt | head -30
done
