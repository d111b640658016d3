#!/usr/bin/env bash
# session 29 run 9: final main (x words in the packed tiles, pinned register prefetch of the one-row kernels): GPU
# tests of the files not finished in run 8 and the new tests, then the quant family's benchmark rows with peers
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
R=/tmp/run9; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 110 python3 -m pytest tests/ops/test_ggml_handoff.py tests/ops/test_moe.py tests/ops/test_quant.py -q -p no:cacheprovider -n 14 -k "handoff or moe or idot_prefetch or x_views or glu" > $R/tests.log 2>&1
tail -2 $R/tests.log
timeout 290 python3 bench/run_all.py --out $R/bench_quant --families quant > $R/bench_quant.log 2>&1
grep -E "^\[bench\]" $R/bench_quant.log | grep -E "decode|moe" | head -70
tar -czf $OUT/run9.tgz -C /tmp run9
