#!/usr/bin/env bash
# session 28 run 1: packed Q4_0 tiles (branch q40-packed) on the GPU: its tests, then the 2-16-row sweep of the
# tensor-core kernel forced on against the default route and cuBLAS (Q4_0; Q4_1's packed 4-byte loads beside it)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl_gguf/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 150 python3 -m pytest tests/ops/test_ggml.py -q -p no:cacheprovider -n 8 -k "tensor_core or error_bar or dtypes" > $R/tests.log 2>&1
tail -3 $R/tests.log
timeout 330 python3 bench/mmv_sweep.py --packed --formats Q4_0,Q4_1 --rows 2,3,8,16 --out $R/sweep.json > $R/sweep.log 2>&1
grep -E "default|cuBLAS|MISMATCH|\(64, 4, 3, 2\)|MMV_BN_ROWS=64 MMV_WARPS_ROWS=4 MMV_STAGES_ROWS=3 PROGRAMS_PER_SM=2" $R/sweep.log | head -80
tar -czf $OUT/run1.tgz -C /tmp run1
