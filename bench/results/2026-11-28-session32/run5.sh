#!/usr/bin/env bash
# session 32 run 5: the mid-rows route (mmv.MID_ROWS_MAX / MID_WIDE) in the default route: test_quant / test_ggml on
# CUDA tensors; the default route against chunked dequantize + cuBLAS at 17-128 rows (the 4-bit formats it covers,
# then the other formats, where the tiled kernel still has 17-127 rows)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run5; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 200 python3 -m pytest tests/ops/test_quant.py tests/ops/test_ggml.py -q -p no:cacheprovider -n 14 > $R/tests.log 2>&1
tail -2 $R/tests.log; grep -E "FAILED|Error" $R/tests.log | head -10
timeout 150 python3 bench/mid_rows_sweep.py --formats affine,Q4_K,Q4_0,Q4_1 --rows 24,48,100 --routes chunked --out $R/mid_rows_default.json > $R/mid_rows_default.log 2>&1
echo "default sweep rc $?"; grep -E "MISMATCH|Error" $R/mid_rows_default.log | head
timeout 200 python3 bench/mid_rows_sweep.py --formats affine8,affine3,Q8_0,Q6_K,Q5_K --rows 17,32,64,100 --routes chunked --out $R/mid_rows_other.json > $R/mid_rows_other.log 2>&1
echo "other sweep rc $?"; grep -E "MISMATCH|Error" $R/mid_rows_other.log | head
tar -czf $OUT/run5.tgz -C /tmp run5
