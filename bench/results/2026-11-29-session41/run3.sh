#!/usr/bin/env bash
# Session 41 run 3 (the branch as merged: block_mmv without the routed kernel, Q6_K / Q5_K prefetch always): the
# block_mmv / routing / MoE GGUF tests on CUDA, Q6_K's route at 4-16 rows (run 2's p1 columns: 31.0-31.8 / 31.0-31.2),
# and the quant bench's GGUF rows (OTHER_ROWS 2 / 4 / 8 / 16) for Q8_0, Q5_K, Q6_K.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
R=/tmp/run3; rm -rf $R; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 200 python3 -m pytest tests/ops/test_ggml_block_mmv.py tests/ops/test_ggml.py tests/ops/test_moe.py -v \
  -p no:cacheprovider -n 12 --tb=short -k "block_mmv or streamed or routes or ggml" > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $R/tests.log | cut -c1-200 | tail -15
timeout 70 python3 bench/results/2026-11-29-session40/block_mmv_sweep.py --fmt Q6_K --rows 4,8,16 \
  --shapes 4096x14336,14336x4096 --variants 0 > $R/route_q6k.log 2>&1
echo "q6k rc $?"; cat $R/route_q6k.log
timeout 260 python3 bench/run_all.py --out $R/bench --families quant \
  --ops ggml_matmul_Q8_0,ggml_matmul_Q5_K,ggml_matmul_Q6_K > $R/bench.log 2>&1
echo "bench rc $?"; grep "^\[bench\]" $R/bench.log | cut -c1-200
tar -czf $OUT/run3.tgz -C /tmp run3
