#!/usr/bin/env bash
# session 30 run 2: branch pinned-rows (q8_mv back to main): where the rows kernels' prefetch pays (sweep), then the
# GPU tests of the changed kernels' files
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
D=bench/results/2026-11-28-session30
R=/tmp/run2; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 200 python3 $D/rows_prefetch_sweep.py $R/rows_prefetch_sweep.json > $R/rows_prefetch_sweep.log 2>&1
cat $R/rows_prefetch_sweep.log | grep -v Warn
timeout 200 python3 -m pytest tests/ops/test_ggml_q4_rows.py tests/ops/test_ggml_q4k_rows.py tests/ops/test_ggml_q5k_mv.py tests/ops/test_ggml.py tests/ops/test_quant.py -q -p no:cacheprovider -n 14 -x -k "q4_rows or q4k_rows or q5k_mv or streamed or gpu or idot_rows or rows_prefetch or idot_prefetch" > $R/tests.log 2>&1
tail -3 $R/tests.log
tar -czf $OUT/run2.tgz -C /tmp run2
