#!/usr/bin/env bash
# session 27 run 1: branch odd-partial-step A/B against main (odd_ab.sh), then GPU tests of the review refactors of
# session 26 (test_dependent, ggml one-row kernels, quant) on the branch tree (= main + affine_mv_odd's partial step)
bash bench/results/2026-11-26-session26/odd_ab.sh
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
R=/tmp/odd_ab
timeout 200 python3 -m pytest tests/runtime/test_dependent.py tests/ops/test_ggml.py tests/ops/test_ggml_q8_mv.py \
  tests/ops/test_ggml_q5k_mv.py tests/ops/test_ggml_q6k_mv.py tests/ops/test_ggml_q4_idot.py tests/ops/test_quant.py \
  -q -p no:cacheprovider -n 14 -x > $R/pytest_refactors.log 2>&1; tail -3 $R/pytest_refactors.log
tar -czf $OUT/odd_ab.tgz -C /tmp odd_ab
