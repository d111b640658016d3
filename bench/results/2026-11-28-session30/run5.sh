#!/usr/bin/env bash
# session 30 run 5: the read ceiling of small mat-vecs (bench/read_ceiling.py), then GPU tests of the quant / GGUF /
# MoE files on CUDA tensors (as many as fit)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run5; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 60 python3 bench/read_ceiling.py --out $R > $R/read_ceiling.log 2>&1
grep "copy\|read" $R/read_ceiling.log
timeout 330 python3 -m pytest tests/ops/test_moe.py tests/ops/test_ggml_handoff.py tests/ops/test_quant.py tests/ops/test_ggml.py tests/ops/test_ggml_q4k_rows.py tests/ops/test_ggml_q4_rows.py tests/ops/test_ggml_q4_idot.py -q -p no:cacheprovider -n 14 > $R/tests.log 2>&1
tail -3 $R/tests.log; grep -E "FAILED|Error" $R/tests.log | head -20
tar -czf $OUT/run5.tgz -C /tmp run5
