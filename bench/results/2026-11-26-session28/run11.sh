#!/usr/bin/env bash
# session 28 run 11: final main (wide Q4_0 / Q4_1 steps, 8-row x tiles for Q4_K): GPU tests of the GGUF / quant / MoE files, the
# quant family's benchmark rows with peers (issue 4)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
R=/tmp/run11; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
git log --oneline -1 > $R/commit.txt 2>/dev/null
timeout 200 python3 -m pytest tests/ops/test_ggml.py tests/ops/test_ggml_q4_rows.py tests/ops/test_quant.py tests/ops/test_moe.py -q -p no:cacheprovider -n 14 > $R/tests.log 2>&1
tail -3 $R/tests.log
timeout 280 python3 bench/run_all.py --out $R/bench_quant --families quant > $R/bench_quant.log 2>&1
grep -E "^\[bench\]" $R/bench_quant.log | grep -E "decode" | head -60
tar -czf $OUT/run11.tgz -C /tmp run11
