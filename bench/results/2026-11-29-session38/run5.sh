#!/usr/bin/env bash
# session 38 run 5 (branch q6k-x-shared as session 37 left it; planned there): x shared through shfl. The q6k_idot
# tests on CUDA first (the shfl path has only run offline: SASS and TTGIR), then the sweep with the size rule off
# (MIN_VALUES=0) on the small and large shapes against q6k_mv; 2 and 4 rows of x (MR) against q6k_mv's MR rows
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run5; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 240 python3 -m pytest tests/ops/test_ggml_q6k_idot.py tests/ops/test_ggml_q6k_mv.py tests/ops/test_ggml_mv_rows.py -q -p no:cacheprovider -n 16 -rf --tb=short > $R/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|Error|passed|failed" $R/tests.log | cut -c1-300 | head -12
timeout 240 python3 bench/gguf_mv_sweep.py --types Q6_K --shapes 4096x1024,4096x4096,4096x14336,14336x4096,4096x128256 --grid "IDOT_BN=8,16;PROGRAMS_PER_SM=8;PREFETCH=1;MIN_VALUES=0" --out $R/q6k_sweep.json > $R/sweep.log 2>&1; echo "sweep rc $?"
grep -E "us |copy bandwidth" $R/sweep.log | cut -c1-150
timeout 200 python3 bench/gguf_mv_sweep.py --types Q6_K --rows 2,4 --shapes 4096x14336,14336x4096 --out $R/q6k_rows_sweep.json > $R/rows.log 2>&1; echo "rows sweep rc $?"
grep -E "us " $R/rows.log | cut -c1-150
tar -czf $OUT/run5.tgz -C /tmp run5
