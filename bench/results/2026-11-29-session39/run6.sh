#!/usr/bin/env bash
# the tensor-core decode kernel (mmv.py, MLX g64, packed tiles) on the H200 with more bytes in flight: run 5's
# Nsight profile showed 448 programs (3.4 an SM, 19% achieved occupancy, 31% of DRAM peak) at 2 and 16 rows;
# stages 3 -> 4-6, programs per SM 2 -> 4, 256-code steps, tiles of 32 / 128 rows
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/bench
R=/tmp/run6; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/card.txt
timeout 420 python3 - > $R/mmv_sweep.log 2>&1 <<'PY'
import sys
import mmv_sweep as s
s.SHAPES[:] = [(4096, 14336), (14336, 4096)]
s.PACKED_VARIANTS[:] = [dict(zip(s.PACKED_KNOBS, v)) for v in (
    (True, 64, 4, 128, 3, 2), (True, 64, 4, 128, 4, 2), (True, 64, 4, 128, 6, 2), (True, 64, 4, 128, 3, 4),
    (True, 64, 4, 128, 4, 4), (True, 64, 4, 256, 3, 2), (True, 64, 4, 256, 4, 2), (True, 32, 4, 128, 4, 2),
    (True, 128, 8, 128, 4, 2))]
sys.argv = ["mmv_sweep.py", "--packed", "--formats", "affine", "--rows", "2,16", "--out", "/tmp/run6/mmv_sweep.json"]
sys.exit(s.main())
PY
echo "sweep rc $?"; grep -v "^$" $R/mmv_sweep.log | cut -c1-150 | head -60
tar -czf $OUT/run6.tgz -C /tmp run6
