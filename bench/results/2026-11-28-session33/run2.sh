#!/usr/bin/env bash
# session 33 run 2: the expert-grouped tensor-core kernel (ops/moe/grouped.py) for MoE prefill: test_moe.py on CUDA
# tensors, bench/moe_prefill_sweep.py (default route, the tiled kernel before, peers; launch configs at T512), the
# moe_ffn rows of the quant family
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run2; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 150 python3 -m pytest tests/ops/test_moe.py -q -p no:cacheprovider -n 14 > $R/tests.log 2>&1
echo "tests rc $?"; tail -2 $R/tests.log; grep -E "FAILED|Error" $R/tests.log | head -10
timeout 200 python3 bench/moe_prefill_sweep.py --out $R/sweep.json > $R/sweep.log 2>&1; echo "sweep rc $?"; cat $R/sweep.log
timeout 150 python3 bench/moe_prefill_sweep.py --shapes qwen3-30b-a3b --tokens 512 --configs all --out $R/configs.json > $R/configs.log 2>&1; echo "configs rc $?"; grep -E "gate/up \(|down \(|Error" $R/configs.log | sort -t' ' -k1,1 | cut -c1-120
timeout 90 python3 bench/run_all.py --out $R/quant --families quant --ops moe_ffn_qwen3-30b-a3b,moe_ffn_qwen3.6-35b-a3b > $R/quant.log 2>&1; echo "quant rc $?"; grep "^\[bench\]" $R/quant.log | cut -c1-170
tar -czf $OUT/run2.tgz -C /tmp run2
