#!/usr/bin/env bash
# branch q6k-x-shared merged with main: the q6k_idot tests on CUDA; one row: the branch's knobs (size rule off) and
# main's kernel (cmp_main/: git archive of main's src and bench) in the same run; 2-4 rows with 16 / 32-row tiles
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
R=/tmp/run6; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
S="4096x4096,4096x14336,14336x4096,4096x128256"
(export PYTHONPATH=/tmp/site:$PWD/src
 timeout 130 python3 -m pytest tests/ops/test_ggml_q6k_idot.py -q -p no:cacheprovider -n 16 -rf --tb=short > $R/tests.log 2>&1
 echo "tests rc $?"; grep -E "FAILED|Error|passed|failed" $R/tests.log | cut -c1-300 | head -12
 timeout 170 python3 bench/gguf_mv_sweep.py --types Q6_K --shapes $S --grid "IDOT_BN=8,16;PROGRAMS_PER_SM=8,16;MIN_VALUES=0" --out $R/branch_one_row.json > $R/branch_one_row.log 2>&1; echo "branch one-row rc $?"
 grep -E " us |copy bandwidth" $R/branch_one_row.log | cut -c1-150)
(export PYTHONPATH=/tmp/site:$PWD/cmp_main/src
 timeout 90 python3 cmp_main/bench/gguf_mv_sweep.py --types Q6_K --shapes $S --grid "IDOT_BN=16;PROGRAMS_PER_SM=8;MIN_VALUES=0" --out $R/main_one_row.json > $R/main_one_row.log 2>&1; echo "main one-row rc $?"
 grep -E " us |copy bandwidth" $R/main_one_row.log | cut -c1-150)
(export PYTHONPATH=/tmp/site:$PWD/src
 timeout 175 python3 bench/gguf_mv_sweep.py --types Q6_K --rows 2,4,3 --shapes 4096x14336,14336x4096 --row-grid "ROWS_BN=16,32;PROGRAMS_PER_SM=4" --out $R/rows.json > $R/rows.log 2>&1; echo "rows rc $?"
 grep -E " us " $R/rows.log | cut -c1-150)
tar -czf $OUT/run6.tgz -C /tmp run6
