#!/usr/bin/env bash
# session 31 run 6: q4k_idot with the tiles of two steps in flight (PREFETCH=2, after run 5's profile: 46% of the
# stall samples on the one-step prefetch's wait): the Q4_K integer-dot tests on CUDA tensors, then the kernel's
# grid with prefetch 0 / 1 / 2 on long-K shapes
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run6; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 100 python3 -m pytest tests/ops/test_ggml.py -q -p no:cacheprovider -n 8 -k "q4k_idot" > $R/tests.log 2>&1
tail -2 $R/tests.log; grep -E "FAILED|Error" $R/tests.log | head -10
timeout 300 python3 bench/affine_mv_sweep.py --kernel q4k_idot --shapes 14336x4096,18944x3584,12288x4096,14336x1024 \
  --grid "4,1,1,1;4,1,2,1;8,1,2,1;4,2,1,1;4,2,2,1;8,2,2,1" --out $R/q4k_pf2_sweep.json > $R/q4k_pf2_sweep.log 2>&1
echo "sweep rc $?"; grep -vE "^\s*$|PTX" $R/q4k_pf2_sweep.log | grep -v "word-level" | tail -50
tar -czf $OUT/run6.tgz -C /tmp run6
