#!/usr/bin/env bash
# the merged branch with the tile rule (16-row tiles only where they fill the SMs; 2-4 rows: 16-row tiles, 4 programs
# per SM): the q6k_idot tests on CUDA; one row and 2-4 rows at the defaults; main's kernel (cmp_main/) in the same
# run; the 8B-shaped Q6_K decode
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
R=/tmp/run7; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
S="4096x14336,14336x4096,4096x128256,8192x28672,28672x8192"
(export PYTHONPATH=/tmp/site:$PWD/src
 timeout 120 python3 -m pytest tests/ops/test_ggml_q6k_idot.py -q -p no:cacheprovider -n 16 -rf --tb=short > $R/tests.log 2>&1
 echo "tests rc $?"; grep -E "FAILED|Error|passed|failed" $R/tests.log | cut -c1-300 | head -12
 timeout 90 python3 bench/gguf_mv_sweep.py --types Q6_K --shapes $S --grid "PREFETCH=1" --out $R/one_row.json > $R/one_row.log 2>&1; echo "one-row rc $?"
 grep -E " us |copy bandwidth" $R/one_row.log | cut -c1-150)
(export PYTHONPATH=/tmp/site:$PWD/cmp_main/src
 timeout 70 python3 cmp_main/bench/gguf_mv_sweep.py --types Q6_K --shapes $S --grid "PREFETCH=1" --out $R/main_one_row.json > $R/main_one_row.log 2>&1; echo "main one-row rc $?"
 grep -E " us |copy bandwidth" $R/main_one_row.log | grep streamed | cut -c1-150)
(export PYTHONPATH=/tmp/site:$PWD/src
 timeout 160 python3 bench/gguf_mv_sweep.py --types Q6_K --rows 2,3,4 --shapes 4096x14336,14336x4096 --row-grid "ROWS_BN=16" --out $R/rows.json > $R/rows.log 2>&1; echo "rows rc $?"
 grep -E " us " $R/rows.log | cut -c1-150
 timeout 80 python3 bench/model.py --out $R/model --only llama8b --skip-hf --skip-compiled --kinds-8b gguf-Q6_K > $R/model.log 2>&1; echo "model rc $?"
 grep -h "Q6_K" $R/model.log | cut -c1-200 | head -4)
tar -czf $OUT/run7.tgz -C /tmp run7
