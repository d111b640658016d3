#!/usr/bin/env bash
# Nsight Compute of the tensor-core decode kernel (mmv.py) at 2 and 16 rows of MLX 4-bit g64, 4096 x 14336 (flat at
# ~21 us for 2-16 rows, 1.77x one row): stall reasons, occupancy, memory throughput
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
R=/tmp/run5; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
for m in 16 2; do
  timeout 200 ncu --clock-control none --kernel-name regex:mmv_kernel --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section Occupancy --section LaunchStats --section SourceCounters \
    python3 scripts/ncu_decode_matmul.py --format affine --m $m --k 4096 --n 14336 --mmv on > $R/ncu_m$m.log 2>&1
  echo "ncu m$m rc $?"
done
grep -E "Duration|Throughput|Registers|Achieved Occupancy|Theoretical Occupancy|Block Limit|Grid Size|Stall|Warp Cycles|Issued Ipc|No Eligible|Eligible Warps|L2 Hit|Mem Busy|Max Bandwidth|Waves" $R/ncu_m16.log | head -50
tar -czf $OUT/run5.tgz -C /tmp run5
