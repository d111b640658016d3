#!/usr/bin/env bash
# session 32 run 8: the quant family's MLX g64 4-bit rows with peers, now with batches of 32-128 rows (quant.MID)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
R=/tmp/run8; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 200 python3 bench/run_all.py --out $R/bench_quant --families quant --ops qmm_affine_4b_g64 > $R/bench_quant.log 2>&1
echo "quant rc $?"; grep "^\[bench\]" $R/bench_quant.log | cut -c1-160
python3 bench/quant.py --summary $R/bench_quant/results.json > $R/quant_summary.md 2>&1
tar -czf $OUT/run8.tgz -C /tmp run8
