#!/usr/bin/env bash
# moe_ffn in one launch (ops/moe/fused.py): the moe_ffn / route tests on CUDA (the one-launch GPU test first: a hang
# would show there), then bench/moe_sweep.py (launch configs against the chained launches)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 120 python3 -m pytest tests/ops/test_moe.py -q -p no:cacheprovider -rf --tb=short -x -k "gpu_moe_ffn_qwen3_30b" > $R/tests_gpu.log 2>&1
echo "gpu test rc $?"; grep -E "FAILED|Error|passed|failed" $R/tests_gpu.log | cut -c1-300 | head -12
timeout 150 python3 -m pytest tests/ops/test_moe.py -q -p no:cacheprovider -n 8 -rf --tb=short -k "moe_ffn or route" > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|Error|passed|failed" $R/tests.log | cut -c1-300 | head -12
timeout 300 python3 bench/moe_sweep.py --out $R/moe_sweep.json > $R/moe_sweep.log 2>&1
echo "sweep rc $?"; grep -v "^$" $R/moe_sweep.log | cut -c1-200 | head -60
tar -czf $OUT/run1.tgz -C /tmp run1
