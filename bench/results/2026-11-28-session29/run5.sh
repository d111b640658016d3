#!/usr/bin/env bash
# session 29 run 5 (branch x-raw): GPU tests of the tensor-core decode kernel, then main (build/snap_main) against
# the tree on the default route of MLX / Q4_K at 2-16 rows, two alternated rounds
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
R=/tmp/run5; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
export PYTHONPATH=/tmp/site:$PWD/src
timeout 150 python3 -m pytest tests/ops/test_quant.py tests/ops/test_ggml.py -q -p no:cacheprovider -n 12 -k "tensor_core or wide or extreme or error_bar" > $R/tests.log 2>&1
tail -2 $R/tests.log
timeout 150 python3 -m pytest tests/ops/test_quant.py tests/ops/test_ggml.py -q -p no:cacheprovider -n 12 -m gpu -k "tensor_core or wide" > $R/tests_gpu.log 2>&1
tail -2 $R/tests_gpu.log
for round in 1 2; do
  for pkg in snap tree; do
    src=$PWD/src; [ $pkg = snap ] && src=$PWD/build/snap_main/src
    PYTHONPATH=/tmp/site:$src timeout 100 python3 bench/results/2026-11-28-session29/xwords_ab.py $R/${pkg}_$round.json > $R/${pkg}_$round.log 2>&1
    echo "== $pkg round $round"; grep -E "default route" $R/${pkg}_$round.log | grep -v "K4096   N4096 " | awk '{print $1, $2, $3, $4, $(NF-3), $(NF-2)}' | tr '\n' ';'; echo
  done
done
tar -czf $OUT/run5.tgz -C /tmp run5
