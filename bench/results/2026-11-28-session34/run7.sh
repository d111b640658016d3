#!/usr/bin/env bash
# session 34 run 7: Q6_K tiles from 16-bit loads: CUDA tests of every path this session touched, dequantize and
# MoE / dense prefill timings
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run7; mkdir -p $R
for spec in "tests/ops/test_ggml.py::Q6_K or dequant or chunk or prefill or types_without" "tests/ops/test_moe.py::" \
            "tests/ops/test_quant.py::gather or moe or grouping" "tests/ops/test_quant_prefill.py::"; do
  f=${spec%%::*}; k=${spec#*::}; n=$(basename $f .py)
  timeout 110 python3 -m pytest $f -q -p no:cacheprovider -n 14 -v -rf --tb=line ${k:+-k "$k"} > $R/$n.log 2>&1
  echo "$n rc $?"; grep -E "FAILED|Error|passed|failed" $R/$n.log | cut -c1-300 | head -20
done
timeout 60 python3 bench/dequant_sweep.py --types Q6_K,Q4_K,Q8_0 --bits 4 --out $R/dequant_sweep.json > $R/dequant_sweep.log 2>&1
echo "dequant rc $?"; tail -9 $R/dequant_sweep.log
timeout 100 python3 bench/moe_formats_sweep.py --tokens 128,512,2048 --formats Q6_K --out $R/moe_formats.json > $R/moe_formats.log 2>&1
echo "formats rc $?"; tail -7 $R/moe_formats.log
timeout 80 python3 bench/mid_rows_sweep.py --formats Q6_K --rows 512 --routes chunked --out $R/mid_q6k.json > $R/mid_q6k.log 2>&1
echo "mid rc $?"; tail -9 $R/mid_q6k.log
tar -czf $OUT/run7.tgz -C /tmp run7
