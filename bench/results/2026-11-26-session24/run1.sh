#!/usr/bin/env bash
# session 24 run 1 (branch gguf-handoff): GPU tests of the GGUF norm hand-off, then the 8B-shaped A/B
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 330 python3 -m pytest tests/ops/test_ggml_handoff.py tests/models/test_norm_handoff.py tests/ops/test_ggml.py \
  tests/ops/test_ggml_q4_idot.py tests/ops/test_quant.py -q -p no:cacheprovider -n 12 -x > $OUT/pytest.log 2>&1
tail -5 $OUT/pytest.log
timeout 240 python3 bench/model.py --out /tmp/m --only llama8b --kinds-8b gguf-Q4_K,gguf-Q4_0,mlx-affine-4bit-g64 \
  --fused-attn --profile --skip-hf --skip-compiled > $OUT/model.log 2>&1
grep -E 'tok/s|tg|floor' $OUT/model.log | tail -30
cp /tmp/m/model_results.* $OUT/ 2>/dev/null
