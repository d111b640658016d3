#!/usr/bin/env bash
# session 32 run 4: 17-128 rows of x: the tensor-core decode kernel (64- and 128-feature tiles) against the tiled
# kernel, chunked dequantize + cuBLAS and bf16 cuBLAS, MLX g64 / Q4_K / Q4_0 / Q4_1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run4; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 540 python3 bench/mid_rows_sweep.py --formats affine,Q4_K,Q4_0,Q4_1 --rows 17,32,48,64,96,128 --out $R/mid_rows.json > $R/mid_rows.log 2>&1
echo "sweep rc $?"; grep -E "MISMATCH|Error|error" $R/mid_rows.log | head; tail -3 $R/mid_rows.log
tar -czf $OUT/run4.tgz -C /tmp run4
