#!/usr/bin/env bash
# Session 44 run 2: after the strided-ids and mix-warps fixes: the MoE model tests, the touched op tests, the rows.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
timeout 300 python3 -m pytest tests/models/test_moe_checkpoints.py tests/models/test_architectures.py tests/models/test_repack.py \
  tests/models/test_mlx_checkpoint.py "tests/ops/test_moe.py" "tests/ops/test_quant.py" "tests/ops/test_ggml.py" \
  -k "moe or strided or warps or embedding or repack or mlx" -p no:cacheprovider -n 15 -q --tb=short > $OUT/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed|Error" $OUT/tests.log | cut -c1-240 | tail -12
timeout 240 python3 bench/model.py --out $OUT/model --only llama8b --arch qwen3-30b-a3b --layers-8b 12 \
  --kinds-8b mlx-affine-4bit-g64,gguf-Q4_K --reps 3 > $OUT/model.log 2>&1
echo "model rc $?"; grep -v "^\s*$" $OUT/model.log | cut -c1-200 | tail -8
