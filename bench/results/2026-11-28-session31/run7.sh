#!/usr/bin/env bash
# session 31 run 7: Q4_K one row on rows whose K gives whole 1-warp steps only (K / 256 an odd multiple of 8) and few
# row tiles per SM (run 6: 14336 x 1024 12.17 us by default with 1-warp programs, 8.22 with 2 warps and a partial
# last step): 1 against 2 warps
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run7; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 200 python3 bench/affine_mv_sweep.py --kernel q4k_idot --shapes 14336x1024,14336x2048,14336x3072,10240x2048,6144x1024,6144x2048 \
  --grid "4,1,1,1;4,2,1,1;4,2,0,1;8,2,1,1;2,2,1,1" --out $R/q4k_warps_sweep.json > $R/q4k_warps_sweep.log 2>&1
echo "sweep rc $?"; grep -vE "^\s*$|PTX|word-level|q4k_mv|cuBLAS" $R/q4k_warps_sweep.log | tail -50
tar -czf $OUT/run7.tgz -C /tmp run7
