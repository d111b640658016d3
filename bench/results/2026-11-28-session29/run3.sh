#!/usr/bin/env bash
# session 29 run 3: Nsight Compute on main's packed MLX tiles at 16 rows (4096 x 14336): stall reasons by SASS
# instruction (where a step's ~2000 cycles go)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
P=scripts/ncu_decode_matmul.py
timeout 150 ncu --clock-control none --kernel-name regex:mmv_kernel --launch-skip 3 --launch-count 1 \
  --section WarpStateStats --section SourceCounters --section SpeedOfLight --print-details all \
  python3 $P --format affine --m 16 --k 4096 --n 14336 --mmv on > $R/ncu_details.txt 2>&1
echo "details rc=$?"
timeout 150 ncu --clock-control none --kernel-name regex:mmv_kernel --launch-skip 3 --launch-count 1 \
  --section WarpStateStats --section SourceCounters --page source --print-source sass --csv \
  python3 $P --format affine --m 16 --k 4096 --n 14336 --mmv on > $R/ncu_source.csv 2>&1
echo "source rc=$?"
grep -iE "stall|warp cycles" $R/ncu_details.txt | head -40
tar -czf $OUT/run3.tgz -C /tmp run3
