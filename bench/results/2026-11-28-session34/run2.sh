#!/usr/bin/env bash
# session 34 run 2: Q6_K structured tiles (dequantize, tiled kernel) on CUDA; MoE formats: dequantized chunks vs the
# tiled grouped kernel per launch config
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run2; mkdir -p $R
timeout 120 python3 -m pytest tests/ops/test_ggml.py -q -p no:cacheprovider -n 14 -v -rf --tb=line -k "Q6_K or dequant" > $R/test_ggml.log 2>&1
echo "test_ggml rc $?"; grep -E "FAILED|Error|passed|failed" $R/test_ggml.log | cut -c1-300 | head -20
timeout 60 python3 bench/dequant_sweep.py --types Q6_K,Q4_K --bits 4 --out $R/dequant_sweep.json > $R/dequant_sweep.log 2>&1; echo "dequant rc $?"
tail -6 $R/dequant_sweep.log
timeout 330 python3 bench/moe_formats_sweep.py --tokens 512,2048 --formats Q6_K,Q8_0,MLX8 \
  --configs "128,128,8,1,0 64,128,4,1,1 64,128,4,2,1 128,128,8,1,1 64,256,4,1,1" --out $R/moe_formats.json > $R/moe_formats.log 2>&1
echo "formats rc $?"; cat $R/moe_formats.log
tar -czf $OUT/run2.tgz -C /tmp run2
