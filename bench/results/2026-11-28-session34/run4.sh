#!/usr/bin/env bash
# session 34 run 4: gather_qmm past decode rows on the grouped kernels (x rows by index): CUDA tests and timing
# against the tiled kernel; launch configs of the dequantized-chunk route's grouped_dense_kernel
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run4; mkdir -p $R
for spec in "tests/ops/test_moe.py::" "tests/ops/test_quant.py::gather or moe or grouping"; do
  f=${spec%%::*}; k=${spec#*::}; n=$(basename $f .py)
  timeout 120 python3 -m pytest $f -q -p no:cacheprovider -n 14 -v -rf --tb=line ${k:+-k "$k"} > $R/$n.log 2>&1
  echo "$n rc $?"; grep -E "FAILED|Error|passed|failed" $R/$n.log | cut -c1-300 | head -20
done
timeout 360 python3 bench/moe_formats_sweep.py --tokens 512,2048 --formats MLX4,Q6_K,Q8_0 --tiled \
  --dense "128,64,4,3 128,64,8,3 64,128,4,3 128,128,8,3 64,64,4,4" --out $R/moe_formats.json > $R/moe_formats.log 2>&1
echo "formats rc $?"; cat $R/moe_formats.log
tar -czf $OUT/run4.tgz -C /tmp run4
