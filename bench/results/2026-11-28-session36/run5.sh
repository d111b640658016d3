#!/usr/bin/env bash
# session 36 run 5: GGUF Q4_K / Q5_K MoE decode on the routed integer-dot mat-vec (ops/moe/gguf_idot.py): the MoE
# step through the runner's ops, old (MLX_NATIVE_GGML_IDOT=0: the tiled routed kernel) / new; test_moe.py on CUDA
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run5; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
MLX_NATIVE_GGML_IDOT=0 timeout 100 python3 bench/moe_gguf_decode.py --types Q4_K,Q5_K --out $R/moe_old.json > $R/moe_old.log 2>&1; echo "moe_old rc $?"
timeout 100 python3 bench/moe_gguf_decode.py --types Q4_K,Q5_K,Q6_K --out $R/moe_new.json > $R/moe_new.log 2>&1; echo "moe_new rc $?"
timeout 100 python3 bench/moe_gguf_decode.py --types Q4_K,Q5_K --tokens 2 --out $R/moe_new_t2.json > $R/moe_new_t2.log 2>&1; echo "moe_new_t2 rc $?"
grep -hE " us " $R/moe_old.log $R/moe_new.log $R/moe_new_t2.log | cut -c1-140
timeout 240 python3 -m pytest tests/ops/test_moe.py -q -p no:cacheprovider -n 16 -rf --tb=short > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|Error|passed|failed" $R/tests.log | cut -c1-300 | head -12
tar -czf $OUT/run5.tgz -C /tmp run5
