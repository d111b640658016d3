#!/usr/bin/env bash
# Session 43 run 3 (main at 3e71deb): the quant family's MoE rows with peers (MLX moe_ffn, GGUF moe_ggml_ffn against
# the three ops and torch bf16 gather + bmm), and the GGUF MoE step rows (bench/moe_gguf_decode.py).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
timeout 300 python3 bench/run_all.py --out $OUT/bench --families quant \
  --ops moe_ffn_qwen3-30b-a3b,moe_ffn_qwen3.6-35b-a3b,moe_ggml_ffn_qwen3-30b-a3b > $OUT/family.log 2>&1
echo "family rc $?"; grep "^\[bench\]" $OUT/family.log | cut -c1-240
timeout 100 python3 bench/moe_gguf_decode.py --out $OUT/moe_gguf.json > $OUT/moe_gguf.log 2>&1
echo "moe_gguf rc $?"; cut -c1-120 $OUT/moe_gguf.log
