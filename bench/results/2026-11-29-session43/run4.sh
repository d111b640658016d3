#!/usr/bin/env bash
# Session 43 run 4 (main at 3e71deb): the whole test suite on CUDA tensors (the SmolLM2-file tests need the GGUF file,
# which is not carried).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
timeout 530 python3 -m pytest tests -q -p no:cacheprovider -n 15 --ignore=tests/models/test_smollm2.py \
  > $OUT/pytest.log 2>&1
echo "rc $?"; grep -E "FAILED|ERROR" $OUT/pytest.log | cut -c1-200 | head -20; tail -2 $OUT/pytest.log
