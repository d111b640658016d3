#!/usr/bin/env bash
# for session 33's first GPU run: what session 32 could not run on the H100 (device time ran out): the stride fixes of
# moe_qmm (5fc5982) and dequantize / quantized_embedding (c20d79d) on CUDA tensors, and the sweeps after the bench
# refactor e32c94c (common.time_any / common.rel_err)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/next; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 120 python3 -m pytest tests/ops/test_moe.py tests/ops/test_quant.py -q -p no:cacheprovider -n 14 -k "strided or embedding or dequantize or moe_qmm" > $R/tests.log 2>&1
echo "tests rc $?"; tail -2 $R/tests.log; grep -E "FAILED|Error" $R/tests.log | head -10
timeout 60 python3 bench/mid_rows_sweep.py --formats Q4_K --rows 24 --routes mmv > $R/mid_rows.log 2>&1; echo "mid_rows rc $?"; tail -5 $R/mid_rows.log
timeout 80 python3 bench/mmv_sweep.py --quick --out $R/mmv_quick.json > $R/mmv_quick.log 2>&1; echo "mmv_sweep rc $?"; tail -4 $R/mmv_quick.log
tar -czf $OUT/next.tgz -C /tmp next
