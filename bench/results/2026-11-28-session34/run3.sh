#!/usr/bin/env bash
# session 34 run 3: the word-loaded Q8_0 / Q6_K grouped kernel (ops/moe/grouped_blocks.py): CUDA tests, configs
# against the dequantized chunks
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run3; mkdir -p $R
timeout 100 python3 -m pytest tests/ops/test_moe.py -q -p no:cacheprovider -n 14 -v -rf --tb=short -k "grouped or ggml" > $R/test_moe.log 2>&1
echo "test_moe rc $?"; grep -E "FAILED|Error|passed|failed" $R/test_moe.log | cut -c1-300 | head -20
timeout 300 python3 bench/moe_formats_sweep.py --tokens 512,2048 --formats Q6_K,Q8_0 \
  --blocks "32,64,4,2 32,64,4,3 32,128,8,2 64,128,8,2 16,64,4,2 32,32,4,2" --out $R/moe_formats.json > $R/moe_formats.log 2>&1
echo "formats rc $?"; cat $R/moe_formats.log
tar -czf $OUT/run3.tgz -C /tmp run3
