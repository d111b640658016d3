#!/usr/bin/env bash
# Session 48 run 4: the runner's prefill graph rule on CUDA (test_generate.py, device-driven chunks of test_architectures.py), then prefill_runner.py (a 4096-token
# prompt in 512-token chunks, eager against the rule; SmolLM2-shaped and Llama-3-8B-shaped 16 layers). carry [".whl"].
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
timeout 100 python3 -m pytest tests/models/test_generate.py tests/models/test_architectures.py -k "generate or graph or device_driven" -p no:cacheprovider -n 8 -q --tb=short > $OUT/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $OUT/tests.log | cut -c1-200 | tail -8
timeout 90 python3 bench/results/2026-12-07-session48/prefill_runner.py > $OUT/runner.log 2>&1
echo "runner rc $?"; grep -E "^\[runner\]|Error|error" $OUT/runner.log | cut -c1-400 | tail -6
