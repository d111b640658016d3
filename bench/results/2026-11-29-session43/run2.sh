#!/usr/bin/env bash
# Session 43 run 2: the Q4_K / Q5_K down projection mixing a token's slots in one program set
# (gguf_idot.moe_q4k_mix_kernel): MoE tests on CUDA, the GGUF MoE step rows (two rounds), MIX_BN 2 / 4 / 8.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
timeout 240 python3 -m pytest tests/ops/test_moe.py -p no:cacheprovider -n 12 -q --tb=short > $OUT/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $OUT/tests.log | cut -c1-220 | tail -8
for r in 1 2; do
  timeout 100 python3 bench/moe_gguf_decode.py --out $OUT/moe_gguf_$r.json > $OUT/bench_$r.log 2>&1
  echo "bench $r rc $?"; cut -c1-120 $OUT/bench_$r.log
done
timeout 120 python3 bench/results/2026-11-29-session43/step_knobs.py MIX_BN 2>&1 | tee $OUT/mix_bn.log
