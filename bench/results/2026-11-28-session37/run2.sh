#!/usr/bin/env bash
# session 37 run 2: q6k_idot with register prefetch of the next super-block's tiles (PREFETCH), 16- and 32-row tiles,
# 4 or 8 programs per SM, against q6k_mv (MLX_NATIVE_GGML_IDOT=0): run 1 without prefetch was latency-bound (95 us
# at 2 programs per SM, 23 us at best)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run2; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 400 python3 bench/gguf_mv_sweep.py --types Q6_K --shapes 4096x14336,14336x4096,4096x128256 --grid "IDOT_BN=16,32;PROGRAMS_PER_SM=4,8;PREFETCH=1" --out $R/q6k_sweep.json > $R/sweep.log 2>&1; echo "sweep rc $?"
grep -E "us |copy bandwidth" $R/sweep.log | cut -c1-150
tar -czf $OUT/run2.tgz -C /tmp run2
