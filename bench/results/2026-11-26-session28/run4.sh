#!/usr/bin/env bash
# session 28 run 4: packed Q4_0 tiles, x in the loop (cp.async; 168 -> 106 registers), Q4_0 knob sets, rows 2-16
# (x in tile order from q40_x_kernel, scales from the loaded words): tests, sweep, ncu at 16 rows
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl_gguf/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
R=/tmp/run4; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 150 python3 -m pytest tests/ops/test_ggml.py -q -p no:cacheprovider -n 8 -k "tensor_core or error_bar or dtypes" > $R/tests.log 2>&1
tail -3 $R/tests.log
timeout 300 python3 bench/mmv_sweep.py --packed --formats Q4_0 --rows 2,3,4,5,8,16 --out $R/sweep.json > $R/sweep.log 2>&1
grep -E "default|cuBLAS|MISMATCH|MMV_BN_ROWS=64 MMV_WARPS_ROWS=4 MMV_STAGES_ROWS=3 Q4_0_PROGRAMS_PER_SM=1" $R/sweep.log | head -80
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --section InstructionStats --section SourceCounters"
timeout 100 ncu --clock-control none --kernel-name regex:mmv_kernel --launch-skip 3 --launch-count 1 $S \
    python3 scripts/ncu_decode_matmul.py --format Q4_0 --m 16 --k 4096 --n 14336 --mmv on > $R/ncu_Q4_0_m16.txt 2>&1
grep -E "Duration|DRAM Throughput|Issue Slots Busy|Registers Per|Achieved Occupancy|Theoretical Occ|Warp Cycles Per Issued|Executed Instructions  |excessive" $R/ncu_Q4_0_m16.txt
tar -czf $OUT/run4.tgz -C /tmp run4
