#!/usr/bin/env bash
# run 9's failures named (output in the session's tool log only, no files): the "rows" tests of test_ggml.py and
# test_ggml_mv_rows.py with -v, then one failing test with its traceback
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
timeout 150 python3 -m pytest tests/ops/test_ggml.py tests/ops/test_ggml_mv_rows.py -v -p no:cacheprovider -n 8 --tb=no \
  -k "(rows and not slices and not routes)" 2>&1 | grep -E "FAILED|ERROR" | cut -c1-200 | head -40
timeout 60 python3 -m pytest "tests/ops/test_ggml_mv_rows.py::test_mv_rows_error_bar[Q8_0-2-19-1024-dtype5-0-False]" -q \
  -p no:cacheprovider --tb=short 2>&1 | tail -25
