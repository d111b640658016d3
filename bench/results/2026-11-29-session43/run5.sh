#!/usr/bin/env bash
# Session 43 run 5: run 4 (the whole suite) ran out of time at 97% with 2 F and 2 E in its dots; the files where the
# SmolLM2-file failures sit (tests/formats, tests/test_cli.py) and test_moe.py, with the failures named.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
timeout 300 python3 -m pytest tests/formats tests/test_cli.py tests/ops/test_moe.py -q -rfE -p no:cacheprovider -n 15 \
  > $OUT/pytest.log 2>&1
echo "rc $?"; grep -E "^(FAILED|ERROR)" $OUT/pytest.log | cut -c1-220 | head -20; tail -1 $OUT/pytest.log
