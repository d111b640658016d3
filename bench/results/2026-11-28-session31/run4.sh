#!/usr/bin/env bash
# session 31 run 4 (issue 3 on main): B8 kv32k D128 decode against cuDNN / flash in 8 interleaved rounds; the
# attention tests on CUDA tensors (real sizes included); the prefill rows with peers (target rows first)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
D=bench/results/2026-11-28-session31
R=/tmp/run4; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 70 python3 bench/results/2026-11-26-session27/b8_rounds.py > $R/b8_rounds.log 2>&1; grep b8 $R/b8_rounds.log
timeout 210 python3 -m pytest tests/ops/test_attention.py -q -p no:cacheprovider -n 14 > $R/tests.log 2>&1
tail -2 $R/tests.log; grep -E "FAILED|Error" $R/tests.log | head -10
timeout 240 python3 bench/attention.py --run $R/attn_prefill --ops "prefill,prefill causal" > $R/attn_prefill.log 2>&1
echo "prefill rc $?"
python3 bench/attention.py --report $R/attn_prefill/results.json > $R/attn_prefill.md 2>&1; grep -E "prefill" $R/attn_prefill.md | head -30
tar -czf $OUT/run4.tgz -C /tmp run4
