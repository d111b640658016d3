#!/usr/bin/env bash
# session 32 run 6: the fused prefill tiles (quant/affine_mm.py) by config against the default route (mmv to 128
# rows, chunked dequantize + cuBLAS after) and bf16 cuBLAS, MLX g64 at 64-1024 rows; the quant tests on CUDA tensors
# (chunks from 17 rows, row-strided weights, the fused tiles)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run6; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 150 python3 -m pytest tests/ops/test_quant.py tests/ops/test_quant_prefill.py tests/ops/test_moe.py -q -p no:cacheprovider -n 14 > $R/tests.log 2>&1
tail -2 $R/tests.log; grep -E "FAILED|Error" $R/tests.log | head -10
timeout 330 python3 bench/mid_rows_sweep.py --formats affine --rows 64,128,256,512,1024 --routes chunked,affine_mm --out $R/affine_mm.json > $R/affine_mm.log 2>&1
echo "sweep rc $?"; grep -E "MISMATCH|Error" $R/affine_mm.log | head
tar -czf $OUT/run6.tgz -C /tmp run6
