#!/usr/bin/env bash
# session 29 run 8 (branch idot-prefetch-words): GPU tests of the one-row GGUF / MLX kernels, then main
# (build/snap_main) against the tree on one row of x, two alternated rounds
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
R=/tmp/run8; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
export PYTHONPATH=/tmp/site:$PWD/src
timeout 170 python3 -m pytest tests/ops/test_quant.py tests/ops/test_ggml_q4_idot.py tests/ops/test_ggml.py tests/ops/test_ggml_handoff.py -q -p no:cacheprovider -n 12 > $R/tests.log 2>&1
tail -2 $R/tests.log
for round in 1 2; do
  for pkg in snap tree; do
    src=$PWD/src; [ $pkg = snap ] && src=$PWD/build/snap_main/src
    PYTHONPATH=/tmp/site:$src timeout 60 python3 bench/results/2026-11-28-session29/m1_ab.py $R/${pkg}_$round.json > $R/${pkg}_$round.log 2>&1
    echo "== $pkg round $round"; awk '{print $1, $2, $3, $4}' $R/${pkg}_$round.log | tr '\n' ';'; echo
  done
done
tar -czf $OUT/run8.tgz -C /tmp run8
