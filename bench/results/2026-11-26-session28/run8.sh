#!/usr/bin/env bash
# session 28 run 8: branch x-tiled: packed MLX / Q4_K tiles with x rewritten in tile order by a launch before
# (mmv.X_TILED) against x reordered in registers; GPU tests of the tensor-core decode kernel first
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl_gguf/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
R=/tmp/run8; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 200 python3 -m pytest tests/ops/test_ggml.py tests/ops/test_quant.py -q -p no:cacheprovider -n 12 -k "tensor_core or mmv or packed or error_bar" > $R/tests.log 2>&1
tail -3 $R/tests.log
timeout 330 python3 bench/results/2026-11-26-session28/tiled_ab.py $R/tiled_ab.json > $R/tiled_ab.log 2>&1
grep -E "default|X_TILED=(True|False) *[0-9]|MISMATCH|Error" $R/tiled_ab.log | head -80
tar -czf $OUT/run8.tgz -C /tmp run8
