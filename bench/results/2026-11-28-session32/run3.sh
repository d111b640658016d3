#!/usr/bin/env bash
# session 32 run 3: 17-64 rows of x on the tensor-core decode kernel (mmv.MID_ROWS_MAX) against the previous route
# (the general tiled kernel) and cuBLAS; the mmv / mid-rows tests on CUDA tensors
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 100 python3 -m pytest tests/ops/test_quant.py tests/ops/test_ggml.py -q -p no:cacheprovider -n 14 -k "mid_rows or tensor_core" > $R/tests.log 2>&1
tail -2 $R/tests.log; grep -E "FAILED|Error" $R/tests.log | head -10
timeout 420 python3 bench/mid_rows_sweep.py --out $R/mid_rows.json > $R/mid_rows.log 2>&1
echo "sweep rc $?"; grep -v "^\s*$" $R/mid_rows.log | tail -200
tar -czf $OUT/run3.tgz -C /tmp run3
