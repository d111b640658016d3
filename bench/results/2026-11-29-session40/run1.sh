#!/usr/bin/env bash
# (1) mmv.py at 2 / 8 / 16 rows of MLX 4-bit g64 with K splits 1-6 forced (session 39's next_mmv_split.py, run as a
# copy of the same code); (2) Nsight Compute of the
# tiled decode kernel (qmm_kernel) on GGUF Q6_K 8 rows, 4096 x 14336 (65-108 us for 5-16 rows against 20 at one row)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 260 python3 bench/results/2026-11-29-session39/next_mmv_split.py --rows 2,8,16 > $R/mmv_split.log 2>&1
echo "split rc $?"; cat $R/mmv_split.log | cut -c1-150
timeout 200 ncu --clock-control none --kernel-name regex:qmm_kernel --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
  --section Occupancy --section LaunchStats --section InstructionStats \
  python3 scripts/ncu_decode_matmul.py --format Q6_K --m 8 --k 4096 --n 14336 > $R/ncu_q6k_m8.log 2>&1
echo "ncu rc $?"
grep -E "Duration|Throughput|Registers|Achieved Occupancy|Theoretical Occupancy|Block Limit|Grid Size|Block Size|Stall|Warp Cycles|Issued Ipc|Issue Slots|No Eligible|Eligible Warps|Mem Busy|Waves|Executed Instructions|Shared Memory" $R/ncu_q6k_m8.log | head -50
tar -czf $OUT/run1.tgz -C /tmp run1
