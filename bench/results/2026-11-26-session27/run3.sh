#!/usr/bin/env bash
# session 27 run 3: the benchmark rows with peers on current main: the quant family (issue 4: one-row, 2-16 rows,
# prefill, MoE) and the decode attention rows (issue 3)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
git log --oneline -1 > $R/commit.txt 2>/dev/null
timeout 260 python3 bench/run_all.py --out $R/bench_quant --families quant > $R/bench_quant.log 2>&1
grep -E "^\[bench\]" $R/bench_quant.log | grep -E "decode|moe" | head -60
timeout 250 python3 bench/attention.py --run $R/attn_decode --ops decode > $R/attn_decode.log 2>&1
tail -5 $R/attn_decode.log
python3 bench/attention.py --report $R/attn_decode/results.json > $R/attn_decode.md 2>&1; grep -E "B8|B1 " $R/attn_decode.md | head -30
tar -czf $OUT/run3.tgz -C /tmp run3
