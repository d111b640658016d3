#!/usr/bin/env bash
# session 36 run 6: the GGUF routed integer-dot mat-vec and moe_weighted_reduce as programmatic dependent launches:
# the GGUF MoE decode step with MLX_NATIVE_PDL=0 / default, two rounds each; test_moe.py on CUDA
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run6; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
for round in 1 2; do
  MLX_NATIVE_PDL=0 timeout 60 python3 bench/moe_gguf_decode.py --types Q4_K,Q5_K --out $R/moe_nopdl$round.json > $R/moe_nopdl$round.log 2>&1; echo "nopdl rc $?"
  timeout 60 python3 bench/moe_gguf_decode.py --types Q4_K,Q5_K --out $R/moe_pdl$round.json > $R/moe_pdl$round.log 2>&1; echo "pdl rc $?"
done
grep -E " us " $R/moe_*.log | cut -c1-150
timeout 200 python3 -m pytest tests/ops/test_moe.py -q -p no:cacheprovider -n 16 -rf --tb=short > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|Error|passed|failed" $R/tests.log | cut -c1-300 | head -12
tar -czf $OUT/run6.tgz -C /tmp run6
