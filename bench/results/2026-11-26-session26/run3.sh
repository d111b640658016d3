#!/usr/bin/env bash
# session 26 run 3: partial last steps only where affine_mv.step_with_tail takes them: GPU tests, then the one-row
# default routes of Q8_0 / Q5_K / Q6_K against main's (build/snap_main) on shapes of Llama-2-7B, Qwen2.5-7B / 14B,
# Qwen3-4B / 8B, Gemma-3-4B and SmolLM2, two rounds; everything under $OUT goes back as one tar
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
PYTHONPATH=/tmp/site:$PWD/src timeout 200 python3 -m pytest tests/ops/test_ggml.py tests/ops/test_ggml_q8_mv.py \
  tests/ops/test_ggml_q5k_mv.py tests/ops/test_ggml_q6k_mv.py -q -p no:cacheprovider -n 12 > $R/pytest.log 2>&1
tail -2 $R/pytest.log
S="--shapes 11008x4096,5376x4096,18944x3584,3584x18944,1536x576,12288x4096,9728x2560,13824x5120,2560x9728,4096x14336"
for round in 1 2; do
  for v in main new; do
    if [ $v = main ]; then P=$PWD/build/snap_main/src; else P=$PWD/src; fi
    for t in "Q8_0 PROGRAMS_PER_SM=2" "Q5_K Q5K_BN=16" "Q6_K Q6K_RT=4"; do
      set -- $t
      PYTHONPATH=/tmp/site:$P timeout 80 python3 bench/gguf_mv_sweep.py --types $1 --grid "$2" $S \
        --out $R/${1}_${v}_$round.json > $R/${1}_${v}_$round.log 2>&1
      grep -E "\(default\)" $R/${1}_${v}_$round.log | sed "s/^/$v $round /"
    done
  done
done > $R/routes.txt
cat $R/routes.txt
tar -czf $OUT/run3.tgz -C /tmp run3
