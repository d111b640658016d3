#!/usr/bin/env bash
# session 34 run 5: B8 kv32k attention decode tile configs on the H200 (issue 3's tie with cuDNN); Q6_K dense
# prefill through the structured dequantize
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
R=/tmp/run5; mkdir -p $R
timeout 300 python3 bench/decode_merge_sweep.py --shapes "B8 Hq64 Hkv8 kv32768 D128" --tiles \
  --configs "128,4,3 128,4,4 128,4,2 128,8,3 128,8,4 64,4,4 64,4,3" --out $R/decode_b8.json > $R/decode_b8.log 2>&1
echo "decode rc $?"; tail -22 $R/decode_b8.log
timeout 150 python3 bench/mid_rows_sweep.py --formats Q6_K --rows 64,512 --routes chunked --out $R/mid_q6k.json > $R/mid_q6k.log 2>&1
echo "mid rc $?"; tail -15 $R/mid_q6k.log
tar -czf $OUT/run5.tgz -C /tmp run5
