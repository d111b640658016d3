#!/usr/bin/env bash
# session 25 run 14: Q4_K rows of no whole number of integer-dot steps (a partial last step): GPU tests, then the
# one-row routes of such shapes (Llama-2-7B, Qwen2.5-7B, Gemma-3-27B-like) against q4k_mv (MLX_NATIVE_GGML_IDOT=0)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 200 python3 -m pytest tests/ops/test_ggml.py tests/ops/test_ggml_handoff.py tests/ops/test_ggml_q4k_rows.py \
  tests/models/test_norm_handoff.py -q -p no:cacheprovider -n 12 > $OUT/pytest.log 2>&1
tail -2 $OUT/pytest.log
timeout 200 python3 bench/gguf_mv_sweep.py --types Q4_K --grid "PROGRAMS_PER_SM=1" \
  --shapes 11008x4096,5376x4096,3584x18944,18944x3584,5376x21504,4096x14336 --out $OUT/q4k_tail.json > $OUT/q4k_tail.log 2>&1
grep -E "M1 K" $OUT/q4k_tail.log | grep -v "GGUF_MV=0"
