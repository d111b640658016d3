#!/usr/bin/env bash
# session 31 run 2: branch q41-maxnreg (build/snap_branch) against main on Q4_1 / Q4_0 2 rows (alternated, two
# rounds); read orders of 1 GiB (read_patterns.py: does the decode attention's access pattern cap it?); the Q4_K
# integer-dot kernel's grid now with 2-warp steps and a partial last step at K = 14336
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
D=bench/results/2026-11-28-session31
R=/tmp/run2; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
for i in 1 2; do
  for pkg in branch main; do
    if [ $pkg = branch ]; then P=$PWD/build/snap_branch/src; else P=$PWD/src; fi
    PYTHONPATH=/tmp/site:$P timeout 60 python3 bench/results/2026-11-28-session30/routes_ab.py $R/routes_${pkg}_$i.json Q4_1:2,Q4_0:2 > $R/routes_${pkg}_$i.log 2>&1
    echo "== $pkg round $i rc $?"
  done
done
python3 - <<'PY'
import json
R = "/tmp/run2"
runs = {p: [json.load(open(f"{R}/routes_{p}_{i}.json")) for i in (1, 2)] for p in ("branch", "main")}
for j, row in enumerate(runs["main"][0]):
    b = min(r[j]["us"] for r in runs["branch"]); m = min(r[j]["us"] for r in runs["main"])
    cb, cm = runs["branch"][0][j]["checksum"], row["checksum"]
    print(f"{row['fmt']:6s} M{row['m']} K{row['k']:<6d} N{row['n']:<6d} main {m:8.2f} branch {b:8.2f} "
          f"{100 * (m / b - 1):+6.1f}%  sums rel {abs(cb - cm) / abs(cm):.1e}")
PY
export PYTHONPATH=/tmp/site:$PWD/src
timeout 90 python3 $D/read_patterns.py $R/read_patterns.json > $R/read_patterns.log 2>&1; cat $R/read_patterns.log | tail -12
timeout 330 python3 bench/affine_mv_sweep.py --kernel q4k_idot --shapes 14336x4096,4096x14336,4096x4096 --out $R/q4k_idot_sweep.json > $R/q4k_idot_sweep.log 2>&1
echo "sweep rc $?"; grep -v "^\s*$" $R/q4k_idot_sweep.log | tail -80
tar -czf $OUT/run2.tgz -C /tmp run2
