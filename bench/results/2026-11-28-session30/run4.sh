#!/usr/bin/env bash
# session 30 run 4: main after the merge of pinned-rows: the quant family's benchmark rows with peers, then the
# Llama-3-8B-shaped decode (4 layers + head, random 4-bit weights: MLX g64, Q4_K, Q4_0), main before the merge
# (build/snap_main) against now
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
R=/tmp/run4; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
PYTHONPATH=/tmp/site:$PWD/src timeout 300 python3 bench/run_all.py --out $R/bench_quant --families quant > $R/bench_quant.log 2>&1
grep -E "^\[bench\]" $R/bench_quant.log | grep -E "decode|moe" | head -70
A="--only llama8b --skip-hf --skip-compiled"
for v in before now; do
  if [ $v = before ]; then P=$PWD/build/snap_main/src; else P=$PWD/src; fi
  PYTHONPATH=/tmp/site:$P timeout 100 python3 bench/model.py --out $R/model_$v $A > $R/model_$v.log 2>&1
  echo "== $v"; grep -E '^\[model\]' $R/model_$v.log | head -6
done
tar -czf $OUT/run4.tgz -C /tmp run4
