#!/usr/bin/env bash
# session 28 run 15: final main (wide_x_kernel one step per program): GPU tests of the tensor-core decode kernel,
# then the quant family's benchmark rows with peers (issue 4)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
R=/tmp/run15; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
git log --oneline -1 > $R/commit.txt 2>/dev/null
timeout 100 python3 -m pytest tests/ops/test_ggml.py -q -p no:cacheprovider -n 12 -k "tensor_core or wide or extreme or error_bar" > $R/tests.log 2>&1
tail -2 $R/tests.log
timeout 280 python3 bench/run_all.py --out $R/bench_quant --families quant > $R/bench_quant.log 2>&1
grep -E "^\[bench\]" $R/bench_quant.log | grep -E "decode" | grep -E " M(2|4|8|16) " | head -30
tar -czf $OUT/run15.tgz -C /tmp run15
