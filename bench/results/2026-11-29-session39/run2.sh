#!/usr/bin/env bash
# one-launch MoE step after run 1 (16.96 us against the chain's 12.41): the spin now polls with volatile loads and
# the kernel is a programmatic dependent launch; the one-token GPU test, then where the time goes (moe_diag.py)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run2; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 100 python3 -m pytest "tests/ops/test_moe.py::test_gpu_moe_ffn_qwen3_30b[1]" -q -p no:cacheprovider -rf --tb=short > $R/tests_gpu.log 2>&1
echo "gpu test rc $?"; grep -E "FAILED|Error|passed|failed" $R/tests_gpu.log | cut -c1-300 | head -12
timeout 240 python3 bench/results/2026-11-29-session39/moe_diag.py > $R/moe_diag.log 2>&1
echo "diag rc $?"; grep -v "^$" $R/moe_diag.log | grep -v Warn | cut -c1-200 | head -60
tar -czf $OUT/run2.tgz -C /tmp run2
