#!/usr/bin/env bash
# session 34 run 6: MoE prefill grouped kernel with 128-row blocks (one pass over an expert's weights for up to 128
# of its rows) against the default configs
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run6; mkdir -p $R
timeout 420 python3 bench/moe_prefill_sweep.py --tokens 512,2048 \
  --configs "128,64,8,3 128,64,8,2 128,128,8,3 64,64,4,3 64,128,8,3" --out $R/moe_prefill.json > $R/moe_prefill.log 2>&1
echo "sweep rc $?"; grep -v "^{" $R/moe_prefill.log | cut -c1-150
tar -czf $OUT/run6.tgz -C /tmp run6
