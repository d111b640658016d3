#!/usr/bin/env bash
# session 31 run 5: Nsight Compute of the one-row integer-dot kernels at 14336 x 4096, MLX g64 (affine_idot, 88% of
# the read ceiling) against GGUF Q4_K (q4k_idot, 72%): DRAM throughput, issue, occupancy, stall reasons; Q4_K's
# stalls by SASS instruction
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=/tmp/run5; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
P=scripts/ncu_decode_matmul.py
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats"
timeout 120 ncu --clock-control none --kernel-name regex:affine_idot_kernel --launch-skip 3 --launch-count 1 $S \
  python3 $P --format affine --m 1 --k 14336 --n 4096 > $R/ncu_affine.txt 2>&1
echo "affine rc=$?"
timeout 120 ncu --clock-control none --kernel-name regex:q4k_idot_kernel --launch-skip 3 --launch-count 1 $S \
  python3 $P --format Q4_K --m 1 --k 14336 --n 4096 > $R/ncu_q4k.txt 2>&1
echo "q4k rc=$?"
timeout 120 ncu --clock-control none --kernel-name regex:q4k_idot_kernel --launch-skip 3 --launch-count 1 \
  --section WarpStateStats --section SourceCounters --page source --print-source sass --csv \
  python3 $P --format Q4_K --m 1 --k 14336 --n 4096 > $R/ncu_q4k_source.csv 2>&1
echo "source rc=$?"
for f in affine q4k; do echo "== $f"; grep -E "Duration|DRAM Throughput|Memory Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Block Limit|Grid Size|Block Size|Eligible Warps|No Eligible|Active Warps Per" $R/ncu_$f.txt | head -24; done
tar -czf $OUT/run5.tgz -C /tmp run5
