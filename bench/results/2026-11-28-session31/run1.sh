#!/usr/bin/env bash
# session 31 run 1: the benchmark rows with peers on main f027072, now with the read ceiling beside each decode row:
# the quant family (issue 4) and the decode attention rows (issue 3)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 300 python3 bench/run_all.py --out $R/bench_quant --families quant > $R/bench_quant.log 2>&1
echo "quant rc $?"
python3 bench/quant.py --summary $R/bench_quant/results.json > $R/quant_summary.md 2>&1; head -60 $R/quant_summary.md
timeout 250 python3 bench/attention.py --run $R/attn_decode --ops decode > $R/attn_decode.log 2>&1
echo "attn rc $?"; tail -3 $R/attn_decode.log
python3 bench/attention.py --report $R/attn_decode/results.json > $R/attn_decode.md 2>&1; grep -E "B8|B1 " $R/attn_decode.md | head -30
tar -czf $OUT/run1.tgz -C /tmp run1
