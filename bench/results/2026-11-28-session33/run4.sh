#!/usr/bin/env bash
# session 33 run 4: MoE prefill with peers (torch._grouped_mm on bf16 experts) and GGUF experts (Q4_K gate/up on the
# grouped kernel, Q4_K / Q6_K down); batch-1 decode tile configs and split counts on the H200 (B1 kv8k-128k at 0.97-
# 1.06x cuDNN in run 1)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run4; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 220 python3 bench/moe_prefill_sweep.py --gguf --tokens 128,512,2048 --out $R/sweep.json > $R/sweep.log 2>&1; echo "sweep rc $?"; cut -c1-150 $R/sweep.log
timeout 200 python3 bench/decode_merge_sweep.py --shapes "B1 Hq64" --splits 24,32 --out $R/decode.json > $R/decode.log 2>&1; echo "decode rc $?"; grep -v "^{" $R/decode.log | cut -c1-130
tar -czf $OUT/run4.tgz -C /tmp run4
