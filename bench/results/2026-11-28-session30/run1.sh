#!/usr/bin/env bash
# session 30 run 1: branch pinned-rows against main (build/snap_main): GPU tests of the changed kernels, the default
# route of the changed formats / rows alternated branch, main, branch, main, and the rows kernels' prefetch on / off
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
D=bench/results/2026-11-28-session30
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
export PYTHONPATH=/tmp/site:$PWD/src
timeout 150 python3 -m pytest tests/ops/test_ggml_q4_rows.py tests/ops/test_ggml_q4k_rows.py tests/ops/test_ggml_q5k_mv.py tests/ops/test_ggml.py tests/ops/test_quant.py -q -p no:cacheprovider -n 14 -k "q4_rows or q4k_rows or q5k_mv or streamed or gpu or idot_rows or rows_prefetch or idot_prefetch" > $R/tests.log 2>&1
tail -3 $R/tests.log
for i in 1 2; do
  for pkg in branch main; do
    if [ $pkg = branch ]; then P=$PWD/src; else P=$PWD/build/snap_main/src; fi
    echo "== $pkg round $i"
    PYTHONPATH=/tmp/site:$P timeout 100 python3 $D/routes_ab.py $R/routes_${pkg}_$i.json > $R/routes_${pkg}_$i.log 2>&1
    tail -1 $R/routes_${pkg}_$i.log
  done
done
PYTHONPATH=/tmp/site:$PWD/src timeout 80 python3 bench/results/2026-11-28-session29/rows_prefetch_ab.py $R/rows_prefetch.json > $R/rows_prefetch.log 2>&1
cat $R/rows_prefetch.log | tail -30
python3 - <<'PY'
import json
R = "/tmp/run1"
runs = {p: [json.load(open(f"{R}/routes_{p}_{i}.json")) for i in (1, 2)] for p in ("branch", "main")}
for j, row in enumerate(runs["main"][0]):
    b = min(r[j]["us"] for r in runs["branch"]); m = min(r[j]["us"] for r in runs["main"])
    cb, cm = runs["branch"][0][j]["checksum"], row["checksum"]
    print(f"{row['fmt']:6s} M{row['m']} K{row['k']:<6d} N{row['n']:<6d} main {m:8.2f} branch {b:8.2f} "
          f"{100 * (m / b - 1):+6.1f}%  sums rel {abs(cb - cm) / abs(cm):.1e}")
PY
tar -czf $OUT/run1.tgz -C /tmp run1
