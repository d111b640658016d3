#!/usr/bin/env bash
# session 33 run 5: experts of the other formats (GGUF Q6_K / Q8_0 / Q5_K, MLX of other bits) past decode through
# dequantized chunks + the grouped tensor-core kernel (grouped.DequantGroupedLaunch); batch-1 decode with four stages
# on the H200: tests on CUDA tensors, the GGUF MoE prefill rows, the attention decode rows
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run5; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 170 python3 -m pytest tests/ops/test_moe.py tests/ops/test_quant.py tests/ops/test_attention.py -q -p no:cacheprovider -n 14 -k "moe or gather or grouping or tile_config or decode" > $R/tests.log 2>&1
echo "tests rc $?"; tail -2 $R/tests.log; grep -E "FAILED|Error" $R/tests.log | head -10
timeout 150 python3 bench/moe_prefill_sweep.py --gguf --shapes qwen3-30b-a3b --tokens 128,512,2048 --out $R/sweep.json > $R/sweep.log 2>&1; echo "sweep rc $?"; grep -E "GGUF|moe_ffn  " $R/sweep.log | cut -c1-150
timeout 150 python3 bench/attention.py --run $R/att --ops decode --budget 60 > $R/att.log 2>&1
echo "attention rc $?"; grep "^\[bench\]" $R/att.log | cut -c1-150
tar -czf $OUT/run5.tgz -C /tmp run5
