#!/usr/bin/env bash
# session 36 run 2: Q5_K one row with 8-row tiles for rows of one whole step; the sweep on one-step, long and head
# shapes; the 8B-shaped Q5_K decode new / old (MLX_NATIVE_GGML_IDOT=0); the quant family's Q5_K rows with peers
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run2; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 150 python3 bench/gguf_mv_sweep.py --types Q5_K --rows 1 --shapes 4096x4096,2048x8192,4096x14336,4096x128256 --out $R/q5k_sweep.json > $R/sweep.log 2>&1; echo "sweep rc $?"
grep -E "us " $R/sweep.log | cut -c1-140
A="--only llama8b --skip-hf --skip-compiled --kinds-8b gguf-Q5_K"
timeout 90 python3 bench/model.py --out $R/model_new $A > $R/model_new.log 2>&1; echo "model_new rc $?"
MLX_NATIVE_GGML_IDOT=0 timeout 90 python3 bench/model.py --out $R/model_old $A > $R/model_old.log 2>&1; echo "model_old rc $?"
grep -E '\| Llama' $R/model_new.log $R/model_old.log | head -8
timeout 150 python3 bench/run_all.py --out $R/bench --families quant --ops ggml_matmul_Q5_K > $R/bench.log 2>&1
echo "bench rc $?"; grep -E "^\[bench\]" $R/bench.log | cut -c1-220 | head -20
tar -czf $OUT/run2.tgz -C /tmp run2
