#!/usr/bin/env bash
# run 5's one test cut off by its timeout (q6k_idot rows, a slow first compile), alone (output: run6_out/tests.log,
# copied from the tool's reply)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src
timeout 100 python3 -m pytest "tests/ops/test_ggml_q6k_idot.py::test_q6k_idot_rows_of_x" -v -p no:cacheprovider --tb=short 2>&1 | tail -6
