#!/usr/bin/env bash
# session 26 run 2: GPU tests of the partial last steps (q4_idot from branch q4-partial-step, q8_mv, q4k_mv's Q5_K,
# q6k_mv), then the one-row default routes of Q8_0 / Q5_K / Q6_K against main's (build/snap_main), two rounds
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
PYTHONPATH=/tmp/site:$PWD/src timeout 240 python3 -m pytest tests/ops/test_ggml.py tests/ops/test_ggml_handoff.py \
  tests/ops/test_ggml_q4_idot.py tests/ops/test_ggml_q8_mv.py tests/ops/test_ggml_q5k_mv.py tests/ops/test_ggml_q6k_mv.py \
  tests/ops/test_ggml_q4_rows.py tests/models/test_norm_handoff.py -q -p no:cacheprovider -n 12 > $OUT/pytest.log 2>&1
tail -2 $OUT/pytest.log
S="--shapes 11008x4096,5376x4096,18944x3584,3584x18944,1536x576,4096x14336"
for round in 1 2; do
  for v in main new; do
    if [ $v = main ]; then P=$PWD/build/snap_main/src; else P=$PWD/src; fi
    for t in "Q8_0 PROGRAMS_PER_SM=2" "Q5_K Q5K_BN=16" "Q6_K Q6K_RT=4"; do
      set -- $t
      PYTHONPATH=/tmp/site:$P timeout 60 python3 bench/gguf_mv_sweep.py --types $1 --grid "$2" $S \
        --out $OUT/${1}_${v}_$round.json > $OUT/${1}_${v}_$round.log 2>&1
      echo "== $v round $round"; grep -E "\(default\)" $OUT/${1}_${v}_$round.log
    done
  done
done
