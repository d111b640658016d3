#!/usr/bin/env bash
# session 33 run 3: rows grouped by expert in three Triton launches (ops/quant/grouping.py) instead of torch's sort
# and scans; grouped-kernel configs from run 2: test_moe.py and the gather_qmm tests on CUDA tensors, the MoE prefill
# sweep (default route), the moe_ffn rows of the quant family
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 170 python3 -m pytest tests/ops/test_moe.py tests/ops/test_quant.py -q -p no:cacheprovider -n 14 -k "moe or gather or grouping" > $R/tests.log 2>&1
echo "tests rc $?"; tail -2 $R/tests.log; grep -E "FAILED|Error" $R/tests.log | head -10
timeout 200 python3 bench/moe_prefill_sweep.py --out $R/sweep.json > $R/sweep.log 2>&1; echo "sweep rc $?"; cut -c1-150 $R/sweep.log
timeout 90 python3 bench/run_all.py --out $R/quant --families quant --ops moe_ffn_qwen3-30b-a3b,moe_ffn_qwen3.6-35b-a3b > $R/quant.log 2>&1; echo "quant rc $?"; grep "^\[bench\]" $R/quant.log | cut -c1-170
tar -czf $OUT/run3.tgz -C /tmp run3
