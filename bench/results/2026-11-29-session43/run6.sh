#!/usr/bin/env bash
# Session 43 run 6: rows per program of the routed Q4_K / Q5_K gate/up kernel in the moe_ggml_ffn step (step_knobs.py GLU_BN).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
timeout 150 python3 bench/results/2026-11-29-session43/step_knobs.py GLU_BN 2>&1 | tee $OUT/glu_bn.log
