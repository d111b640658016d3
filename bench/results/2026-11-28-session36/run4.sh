#!/usr/bin/env bash
# session 36 run 4: the MoE FFN decode step on GGUF experts (bench/moe_gguf_decode.py: the ops a runner chains) against
# MLX affine moe_ffn; the integer-dot tests of test_quant.py and test_moe.py on CUDA (kernels.idot.code_idot split)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run4; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 120 python3 bench/moe_gguf_decode.py --out $R/moe_gguf_decode.json > $R/moe.log 2>&1; echo "moe rc $?"
grep -E " us |copy" $R/moe.log | cut -c1-140
timeout 300 python3 -m pytest tests/ops/test_quant.py tests/ops/test_moe.py -k "idot or rows or moe" -q -p no:cacheprovider -n 16 -rf --tb=short > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|Error|passed|failed" $R/tests.log | cut -c1-300 | head -12
tar -czf $OUT/run4.tgz -C /tmp run4
