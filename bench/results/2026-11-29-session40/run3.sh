#!/usr/bin/env bash
# q6k_mmv.py in half-super-block steps (runtime alignment, register prefetch): its tests on CUDA (with -m gpu's real sizes), the routing and
# slices tests of test_ggml.py; then the sweep against the route before it (q6k_mmv_sweep.py)
# (the sweep script as run: git show 2f1334a:bench/results/2026-11-29-session40/q6k_mmv_sweep.py; its module q6k_mmv.py
# became ops/ggml/block_mmv.py, whose sweep is block_mmv_sweep.py)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 200 python3 -m pytest tests/ops/test_ggml_q6k_mmv.py tests/ops/test_ggml.py -v -p no:cacheprovider -n 8 \
  --tb=short -k "q6k_mmv or streamed_slices or routes_q6k" > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $R/tests.log | cut -c1-200 | tail -15
timeout 330 python3 bench/results/2026-11-29-session40/q6k_mmv_sweep.py > $R/sweep.log 2>&1
echo "sweep rc $?"; cat $R/sweep.log | cut -c1-400
tar -czf $OUT/run3.tgz -C /tmp run3
