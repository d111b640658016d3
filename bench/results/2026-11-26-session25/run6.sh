#!/usr/bin/env bash
# session 25 run 6: GPU tests of the whole-row MLX tiles; the Q4_0 one-row integer-dot kernel's tiles swept with
# 8-warp steps (a K = 4096 row in one step) and 4-row tiles
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 200 python3 -m pytest tests/ops/test_quant.py tests/models/test_norm_handoff.py tests/ops/test_moe.py -q \
  -p no:cacheprovider -n 12 > $OUT/pytest.log 2>&1
tail -3 $OUT/pytest.log
timeout 330 python3 bench/gguf_mv_sweep.py --types Q4_0 --shapes 4096x4096,4096x1024,4096x14336,14336x4096,4096x128256 \
  --grid "Q4I_BN=4,8;Q4I_WPL=2,4;Q4I_MAX_WARPS=2,8;FEW_TILES_PER_SM=0,8" --out $OUT/q40_sweep.json > $OUT/q40_sweep.log 2>&1
python3 - <<'PY'
import json, os, collections
rows = json.load(open(os.environ["OUT"] + "/q40_sweep.json"))
rows = rows["rows"] if isinstance(rows, dict) else rows
by = collections.defaultdict(list)
for r in rows:
    by[(r["k"], r["n"])].append(r)
for key, rs in by.items():
    rs.sort(key=lambda r: r["us"])
    dflt = [r for r in rs if "(default)" in r["variant"]]
    print(key, "default", dflt[0]["us"] if dflt else None)
    for r in rs[:5]:
        print("   ", round(r["us"], 2), r["variant"])
PY
