#!/usr/bin/env bash
# session 28 run 7: the whole test suite on the H100 after the wide Q4_0 / Q4_1 steps (the SmolLM2-file tests need
# the model file, not carried)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
R=/tmp/run7; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 560 python3 -m pytest tests -q -p no:cacheprovider -n 14 --ignore=tests/models/test_smollm2.py > $R/pytest.log 2>&1
tail -3 $R/pytest.log
tar -czf $OUT/run7.tgz -C /tmp run7
