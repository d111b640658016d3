#!/usr/bin/env bash
# session 33 run 1 (the first on an H200 since session 24): session 32's stride fixes on CUDA tensors (its
# next_run.sh), then the issue 3 and issue 4 target rows with peers on this card
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/card.txt
timeout 110 python3 -m pytest tests/ops/test_moe.py tests/ops/test_quant.py -q -p no:cacheprovider -n 14 -k "strided or embedding or dequantize or moe_qmm" > $R/tests.log 2>&1
echo "tests rc $?"; tail -2 $R/tests.log; grep -E "FAILED|Error" $R/tests.log | head -10
timeout 230 python3 bench/attention.py --run $R/att --budget 170 > $R/att.log 2>&1
echo "attention rc $?"; grep "^\[bench\]" $R/att.log | cut -c1-150
timeout 220 python3 bench/run_all.py --out $R/quant --families quant --ops moe_ffn_qwen3-30b-a3b,moe_ffn_qwen3.6-35b-a3b,qmm_affine_4b_g64 > $R/quant.log 2>&1
echo "quant rc $?"; grep "^\[bench\]" $R/quant.log | cut -c1-170
python3 bench/quant.py --summary $R/quant/results.json > $R/quant_summary.md 2>&1
tar -czf $OUT/run1.tgz -C /tmp run1
