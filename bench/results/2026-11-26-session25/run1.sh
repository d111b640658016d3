#!/usr/bin/env bash
# session 25 run 1: Nsight Compute on the decode mat-vecs (where the 2-16-row tensor-core kernel's time goes,
# against the one-row integer-dot kernel on the same bytes)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats --section ComputeWorkloadAnalysis"
P=scripts/ncu_decode_matmul.py
for spec in "affine 16 mmv_kernel" "affine 4 mmv_kernel" "affine 1 affine_idot" "Q4_K 16 mmv_kernel" "Q4_K 1 q4k_idot"; do
  set -- $spec
  timeout 100 ncu --clock-control none --kernel-name regex:$3 --launch-skip 3 --launch-count 1 $S \
    python3 $P --format $1 --m $2 --k 4096 --n 14336 > $OUT/ncu_$1_m$2.txt 2>&1
  echo "== $spec rc=$?"; grep -E "Duration|Memory Throughput|DRAM Throughput|Issue Slots Busy|Executed Ipc Active|No Eligible|Registers Per|Achieved Occupancy|Theoretical Occ|Warp Cycles Per Issued|Block Limit Reg|Grid Size|Executed Instructions  " $OUT/ncu_$1_m$2.txt
done
