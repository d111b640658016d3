#!/usr/bin/env bash
# Session 44 run 1: Qwen3-MoE in the model runner on CUDA (tests) and the Qwen3-30B-A3B-shaped decode rows.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
python3 -c "import transformers, torch, triton; print('transformers', transformers.__version__, 'torch', torch.__version__, 'triton', triton.__version__)"
timeout 240 python3 -m pytest tests/models/test_moe_checkpoints.py tests/models/test_architectures.py -k "moe" \
  -p no:cacheprovider -n 8 -q --tb=short > $OUT/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed|Error" $OUT/tests.log | cut -c1-240 | tail -12
timeout 300 python3 bench/model.py --out $OUT/model --only llama8b --arch qwen3-30b-a3b --layers-8b 12 \
  --kinds-8b mlx-affine-4bit-g64,gguf-Q4_K --reps 3 --profile > $OUT/model.log 2>&1
echo "model rc $?"; grep -v "^\s*$" $OUT/model.log | cut -c1-200 | tail -45
