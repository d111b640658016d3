#!/usr/bin/env bash
# session 28 run 6: Q4_1 wide steps (branch q41-wide): GPU tests of the tensor-core decode kernel, then the 2-16-row
# sweep of Q4_1 (wide steps on / off, tiles) against the default route and cuBLAS
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl_gguf/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
R=/tmp/run6; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 150 python3 -m pytest tests/ops/test_ggml.py -q -p no:cacheprovider -n 8 -k "tensor_core or error_bar or dtypes or extreme or leave_q4_mv" > $R/tests.log 2>&1
tail -3 $R/tests.log
timeout 300 python3 bench/mmv_sweep.py --packed --formats Q4_1 --rows 2,3,4,5,8,16 --out $R/sweep.json > $R/sweep.log 2>&1
grep -E "default|MISMATCH|Q41_WIDE=(True|False) MMV_BN_ROWS=64 MMV_WARPS_ROWS=4 MMV_STAGES_ROWS=3 PROGRAMS_PER_SM=2" $R/sweep.log | head -80
tar -czf $OUT/run6.tgz -C /tmp run6
