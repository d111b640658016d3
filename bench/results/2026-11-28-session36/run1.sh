#!/usr/bin/env bash
# session 36 run 1: Q5_K one row on the integer-dot kernel (q4k_idot.py's Q5K): the GGUF tests on CUDA, the Q5_K
# one-row sweep (old q4k_mv route = MLX_NATIVE_GGML_IDOT=0, and the idot knobs), the 8B-shaped Q5_K decode new / old
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
t() { local name=$1 lim=$2; shift 2; timeout $lim "$@" > $R/$name.log 2>&1; echo "$name rc $?"; grep -E "FAILED|Error|passed|failed" $R/$name.log | cut -c1-300 | head -12; }
t tests 200 python3 -m pytest tests/ops/test_ggml.py tests/ops/test_ggml_handoff.py tests/ops/test_ggml_q5k_mv.py tests/ops/test_ggml_mv_rows.py tests/ops/test_ggml_q4k_rows.py tests/runtime -q -p no:cacheprovider -n 14 -rf --tb=short
t sweep 170 python3 bench/gguf_mv_sweep.py --types Q5_K --rows 1 --shapes 4096x14336,14336x4096,4096x4096,11008x4096 --out $R/q5k_sweep.json
grep -E "us " $R/sweep.log | cut -c1-140
A="--only llama8b --skip-hf --skip-compiled --kinds-8b gguf-Q5_K"
timeout 90 python3 bench/model.py --out $R/model_new $A > $R/model_new.log 2>&1; echo "model_new rc $?"
MLX_NATIVE_GGML_IDOT=0 timeout 90 python3 bench/model.py --out $R/model_old $A > $R/model_old.log 2>&1; echo "model_old rc $?"
grep -E '^\[model\]' $R/model_new.log $R/model_old.log | head -8
tar -czf $OUT/run1.tgz -C /tmp run1
