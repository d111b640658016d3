#!/usr/bin/env bash
# Session 43 run 1: moe_ggml_ffn (GGUF MoE step chained by PDL): the MoE tests on CUDA, then the Qwen3-30B-A3B-shaped
# step rows (bench/moe_gguf_decode.py) for every routed GGUF format, in two rounds.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 300 python3 -m pytest tests/ops/test_moe.py -p no:cacheprovider -n 12 -q --tb=short > $OUT/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $OUT/tests.log | cut -c1-220 | tail -8
for r in 1 2; do
  timeout 120 python3 bench/moe_gguf_decode.py --out $OUT/moe_gguf_$r.json > $OUT/bench_$r.log 2>&1
  echo "bench $r rc $?"; cat $OUT/bench_$r.log | cut -c1-160
done
