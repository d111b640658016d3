#!/usr/bin/env bash
# session 27 run 2: (a) moe_ffn with the routing + L2 prefetch launch against main (moe_ab.py, alternated, two
# rounds); (b) step_with_tail's new rule (dividing steps kept where only the whole steps of the most units split
# one a program) against main on the shapes whose decisions changed; (c) GPU tests of moe and the streamed kernels
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
R=/tmp/run2; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
D=bench/results/2026-11-26-session27
pkg() { if [ $1 = main ]; then echo /tmp/site:$PWD/build/snap_main/src; else echo /tmp/site:$PWD/src; fi; }
for round in 1 2; do for v in main new; do
  PYTHONPATH=$(pkg $v) timeout 100 python3 $D/moe_ab.py --label $v > $R/moe_$v$round.log 2>&1
  grep "\[moe\]" $R/moe_$v$round.log
done; done
PYTHONPATH=$(pkg new) timeout 150 python3 -m pytest tests/ops/test_moe.py -q -p no:cacheprovider -n 8 > $R/pytest_moe.log 2>&1
tail -2 $R/pytest_moe.log
for v in main new; do
  PYTHONPATH=$(pkg $v) timeout 60 python3 bench/odd_bits_sweep.py --routes --bits 3,5,6 \
    --shapes 5376x4096,11520x4096,3840x4096,14080x2048,11008x4096 > $R/odd_$v.log 2>&1
  grep default $R/odd_$v.log | sed "s/^/$v /"
  G="--shapes 5376x2048,11520x2048,14080x1536,3840x2048,2304x1536,17664x1024"
  PYTHONPATH=$(pkg $v) timeout 60 python3 bench/gguf_mv_sweep.py --types Q4_K --grid "PROGRAMS_PER_SM=1" $G > $R/q4k_$v.log 2>&1
  PYTHONPATH=$(pkg $v) timeout 60 python3 bench/gguf_mv_sweep.py --types Q5_K --grid "Q5K_PROGRAMS_PER_SM=1" $G > $R/q5k_$v.log 2>&1
  PYTHONPATH=$(pkg $v) timeout 90 python3 bench/gguf_mv_sweep.py --types Q8_0,Q6_K --grid "PROGRAMS_PER_SM=2" $G > $R/q86_$v.log 2>&1
  grep -h default $R/q4k_$v.log $R/q5k_$v.log $R/q86_$v.log | sed "s/^/$v /"
done
PYTHONPATH=$(pkg new) timeout 120 python3 -m pytest tests/ops/test_quant_odd_bits.py tests/ops/test_ggml_q8_mv.py \
  tests/ops/test_ggml_q6k_mv.py tests/ops/test_ggml_q5k_mv.py -q -p no:cacheprovider -n 12 > $R/pytest_mv.log 2>&1
tail -2 $R/pytest_mv.log
tar -czf $OUT/run2.tgz -C /tmp run2
