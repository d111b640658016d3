#!/usr/bin/env bash
# session 23 run 4 (branch gemv-pdl): whole test suite with every wheel, then SmolLM2-shaped decode per PDL variant
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv > $OUT/env.txt
timeout 330 python3 -m pytest tests -q -p no:cacheprovider -n 8 -rfE > $OUT/pytest.log 2>&1; echo "rc $?" >> $OUT/pytest.log
tail -1 $OUT/pytest.log
for round in 1 2; do
  for v in off gemv_plain gemv_wait gemv_early gemv_late gemv_late_merge_launch; do
    p=1; [ $v = off ] && p=0
    MLX_NATIVE_PDL=$p timeout 40 python3 $(dirname $0)/smollm2_pdl_ab.py $v --out /tmp/ab_$v --only smollm2 \
      --skip-hf --skip-compiled > $OUT/ab_${v}_$round.log 2>&1
    echo "$v round $round: $(grep -h 'mlx-native: pp' $OUT/ab_${v}_$round.log)"
  done
done | tee $OUT/ab_summary.log
