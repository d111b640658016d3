#!/usr/bin/env bash
# session 26 run 5: SmolLM2's shapes after the merge of q4-partial-step (Q4_0 / Q4_1 rows of K = 576 now take q4_idot
# with a partial step) and the Q8_0 short-row steps (the 576 x 49152 head): GPU tests, one-row routes main vs tree,
# then the SmolLM2-shaped decode (synthetic GGUF), main vs tree, two alternated rounds
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
R=/tmp/run5; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
PYTHONPATH=/tmp/site:$PWD/src timeout 150 python3 -m pytest tests/ops/test_ggml.py tests/ops/test_ggml_q8_mv.py \
  tests/ops/test_ggml_q4_idot.py -q -p no:cacheprovider -n 12 > $R/pytest.log 2>&1
tail -2 $R/pytest.log
S="--shapes 576x49152,576x576,576x192,1536x576,576x1536"
for v in main new; do
  if [ $v = main ]; then P=$PWD/build/snap_main/src; else P=$PWD/src; fi
  PYTHONPATH=/tmp/site:$P timeout 80 python3 bench/gguf_mv_sweep.py --types Q8_0,Q4_1,Q4_0 --grid "PROGRAMS_PER_SM=1" $S \
    --out $R/routes_$v.json > $R/routes_$v.log 2>&1
  grep -E "\(default\)|PROGRAMS_PER_SM=1 " $R/routes_$v.log | sed "s/^/$v /"
done
A="--only smollm2 --skip-hf --skip-compiled"
for round in 1 2; do for v in main new; do
  if [ $v = main ]; then P=$PWD/build/snap_main/src; else P=$PWD/src; fi
  PYTHONPATH=/tmp/site:$P timeout 100 python3 bench/model.py --out $R/$v$round $A > $R/model_$v$round.log 2>&1
  echo "== $v round $round"; grep -E '^\[model\]' $R/model_$v$round.log | head -4
done; done
tar -czf $OUT/run5.tgz -C /tmp run5
