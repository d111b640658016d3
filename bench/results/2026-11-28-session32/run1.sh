#!/usr/bin/env bash
# session 32 run 1: session 31's run 8 (the Q4_K small-grid 2-warp rule: tests on CUDA tensors, default routes),
# then read_balance.py (the persistent read's finish-time spread; a run-time split of each column's middle tiles)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 90 python3 -m pytest tests/ops/test_ggml.py tests/ops/test_ggml_handoff.py -q -p no:cacheprovider -n 14 -k "q4k or Q4_K or handoff" > $R/tests.log 2>&1
tail -2 $R/tests.log; grep -E "FAILED|Error" $R/tests.log | head -10
timeout 60 python3 bench/affine_mv_sweep.py --kernel q4k_idot --shapes 14336x2048,6144x1024,14336x4096 --grid "4,1,1,1" > $R/routes.log 2>&1
echo "sweep rc $?"; grep -E "default route|bn=" $R/routes.log
timeout 150 python3 bench/results/2026-11-28-session32/read_balance.py $R/read_balance.json > $R/read_balance.log 2>&1
echo "read_balance rc $?"; cat $R/read_balance.log | tail -20
tar -czf $OUT/run1.tgz -C /tmp run1
