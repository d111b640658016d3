#!/usr/bin/env bash
# session 31 run 8: the Q4_K 2-warp rule for small grids (q4k_idot.TWO_WARPS_BELOW_TILES_PER_SM): the Q4_K tests on
# CUDA tensors, then the default route on two small-grid shapes and 14336 x 4096 (unchanged)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run8; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 70 python3 -m pytest tests/ops/test_ggml.py tests/ops/test_ggml_handoff.py -q -p no:cacheprovider -n 14 -k "q4k or Q4_K or handoff" > $R/tests.log 2>&1
tail -2 $R/tests.log; grep -E "FAILED|Error" $R/tests.log | head -10
timeout 60 python3 bench/affine_mv_sweep.py --kernel q4k_idot --shapes 14336x2048,6144x1024,14336x4096 --grid "4,1,1,1" > $R/routes.log 2>&1
echo "sweep rc $?"; grep -E "default route|bn=" $R/routes.log
tar -czf $OUT/run8.tgz -C /tmp run8
