#!/usr/bin/env bash
# Session 48 run 3: bench/model.py's SmolLM2 rows (random Q4_1 blocks, the real shapes) with the new pp512 replayed
# from a CUDA graph, beside plain PyTorch (eager prefill, compiled decode). carry [".whl"].
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/gguf*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
timeout 420 python3 bench/model.py --out $OUT/model --only smollm2 --skip-hf --reps 5 > $OUT/model.log 2>&1
echo "model rc $?"; grep -E "^\[model\]|Error|error" $OUT/model.log | cut -c1-300 | tail -8; cat $OUT/model/*.md 2>/dev/null | tail -12
