#!/usr/bin/env bash
# session 32 run 7: the fused prefill tiles (quant/affine_mm.py, scales as words through the pipeline) by config against
# the default route and bf16 cuBLAS, MLX g64 at 128-1024 rows; the quant / ggml / MoE tests on CUDA tensors
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run7; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 200 python3 bench/mid_rows_sweep.py --formats affine --rows 128,256,512,1024 --routes chunked,affine_mm --out $R/affine_mm.json > $R/affine_mm.log 2>&1
echo "sweep rc $?"; grep -E "MISMATCH|Error" $R/affine_mm.log | head
timeout 280 python3 -m pytest tests/ops/test_quant.py tests/ops/test_quant_prefill.py tests/ops/test_ggml.py tests/ops/test_moe.py -q -p no:cacheprovider -n 14 -x > $R/tests.log 2>&1
echo "tests rc $?"; tail -2 $R/tests.log; grep -E "FAILED|Error" $R/tests.log | head -10
tar -czf $OUT/run7.tgz -C /tmp run7
