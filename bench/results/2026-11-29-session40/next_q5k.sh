#!/usr/bin/env bash
# Prepared on branch block-mmv-q5k (not run): block_mmv.py with Q5_K, Q8_0 decoded a byte a column (prmt to fp32,
# one cvt a pair) from constant step offsets, Q6_K's ROWS4 loads, and 17-64 rows (x tiles of 32 / 64; chunked
# dequantize + cuBLAS before: the "before" column of the mid-rows sweep). Its tests on CUDA, then the Q5_K sweep against
# the route before it (q4k_idot_rows / q4k_mv rows at 2-4, 4-row slices at 5, the tiled decode kernel at 6-16), the
# Q8_0 sweep (compare run 4: 4096 x 14336 5 / 8 / 16 rows 50.8 / 50.8 / 51.9 us on main's form) and Q6_K's route
# (run 5: 33.2 / 33.6 / 36.8 at 4 / 8 / 16 rows).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
R=/tmp/next_q5k; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 200 python3 -m pytest tests/ops/test_ggml_block_mmv.py tests/ops/test_ggml.py -v -p no:cacheprovider -n 8 \
  --tb=short -k "block_mmv or streamed_slices or routes" > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $R/tests.log | cut -c1-200 | tail -15
S=bench/results/2026-11-29-session40/block_mmv_sweep.py
timeout 150 python3 $S --fmt Q5_K --rows 3,4,5,8,16 --shapes 4096x14336,14336x4096,4096x4096 > $R/sweep_q5k.log 2>&1
echo "q5k rc $?"; cut -c1-400 $R/sweep_q5k.log
timeout 100 python3 $S --fmt Q8_0 --rows 5,8,16 --shapes 4096x14336,14336x4096 > $R/sweep_q8.log 2>&1
echo "q8 rc $?"; cut -c1-400 $R/sweep_q8.log
timeout 60 python3 $S --fmt Q6_K --rows 4,8,16 --shapes 4096x14336 --variants 0 > $R/route_q6k.log 2>&1
echo "q6k rc $?"; cat $R/route_q6k.log
for f in Q6_K Q8_0 Q5_K; do
  timeout 60 python3 $S --fmt $f --rows 17,32,64 --shapes 4096x14336 --variants 0 > $R/mid_$f.log 2>&1
  echo "mid $f rc $?"; cat $R/mid_$f.log
done
tar -czf $OUT/next_q5k.tgz -C /tmp next_q5k
