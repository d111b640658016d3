#!/usr/bin/env bash
# session 28 run 16: review refactor of the wide steps: GPU tests of the tensor-core decode kernel, then the default
# route of Q4_0 / Q4_1 at 4-16 rows, the package before the refactor (build/snap_main) against the tree, twice
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl_gguf/*.whl
export PYTHONUNBUFFERED=1
R=/tmp/run16; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
PYTHONPATH=/tmp/site:$PWD/src timeout 100 python3 -m pytest tests/ops/test_ggml.py -q -p no:cacheprovider -n 12 -k "tensor_core or wide or extreme or error_bar" > $R/tests.log 2>&1
tail -2 $R/tests.log
for round in 1 2; do
  for pkg in snap tree; do
    src=$PWD/src; [ $pkg = snap ] && src=$PWD/build/snap_main/src
    PYTHONPATH=/tmp/site:$src timeout 100 python3 bench/results/2026-11-26-session28/review_ab.py $R/${pkg}_$round.json > $R/${pkg}_$round.log 2>&1
    echo "== $pkg round $round"; grep -E "default route" $R/${pkg}_$round.log
  done
done
tar -czf $OUT/run16.tgz -C /tmp run16
