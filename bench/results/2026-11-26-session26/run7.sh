#!/usr/bin/env bash
# session 26 run 7: the whole test suite on the H100 on final main (the SmolLM2-file tests run in run 8's
# scripts/gpu_model.sh)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
R=/tmp/run7; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
git log --oneline -1 > $R/commit.txt 2>/dev/null
timeout 540 python3 -m pytest tests -q -p no:cacheprovider -n 14 --ignore=tests/models/test_smollm2.py > $R/pytest.log 2>&1
tail -3 $R/pytest.log
tar -czf $OUT/run7.tgz -C /tmp run7
