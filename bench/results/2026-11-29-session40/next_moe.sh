#!/usr/bin/env bash
# Prepared on branch moe-block-mmv (not run): routed decode of GGUF Q6_K / Q8_0 experts on block_mmv.py's routed
# kernel (the tiled routed kernel before: session 36 run 5, Qwen3-30B-A3B-shaped step Q6_K 48.1 us, Q8_0 44.5);
# the branch also holds block-mmv-q5k (run next_q5k.sh for it).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
R=/tmp/next_moe; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 200 python3 -m pytest tests/ops/test_moe.py -v -p no:cacheprovider -n 8 --tb=short -k "ggml" > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $R/tests.log | cut -c1-200 | tail -15
timeout 150 python3 bench/moe_gguf_decode.py --types Q4_K,Q6_K,Q8_0 > $R/moe_gguf_decode.log 2>&1
echo "bench rc $?"; cat $R/moe_gguf_decode.log
tar -czf $OUT/next_moe.tgz -C /tmp next_moe
