#!/usr/bin/env bash
# Session 42 run 7: mmv.balanced_split A/B (split_ab.py, old / new twice) and the mmv / quant GPU tests.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
D=bench/results/2026-11-29-session42
for v in old new old new; do timeout 100 python3 $D/split_ab.py $v >> $OUT/split_ab.log 2>&1; echo "$v rc $?"; done
timeout 200 python3 -m pytest tests/ops/test_quant.py tests/ops/test_ggml.py -m gpu -p no:cacheprovider -n 8 -q \
  --tb=short -k "mmv or rows or real" > $OUT/tests.log 2>&1; echo "tests rc $?"; tail -3 $OUT/tests.log
python3 - <<'PY'
import collections, os, re
t = collections.defaultdict(list)
for line in open(os.environ["OUT"] + "/split_ab.log"):
    m = re.match(r"(old|new) (K\d+ N\d+ \S+ +M ?\d+): +([\d.]+) us +mmv splits (.*)", line)
    if m:
        t[m.group(2)].append((m.group(1), float(m.group(3)), m.group(4)))
for key, v in t.items():
    old = min(x for w, x, _ in v if w == "old"); new = min(x for w, x, _ in v if w == "new")
    so = [s for w, _, s in v if w == "old"][0]; sn = [s for w, _, s in v if w == "new"][0]
    flag = "" if so == sn else "  <- split changed"
    print(f"{key:28s} old {old:7.2f} {so:8s} new {new:7.2f} {sn:8s} new/old {new / old:.3f}{flag}")
PY
