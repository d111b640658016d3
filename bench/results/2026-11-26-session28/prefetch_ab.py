"""Session 28: wide Q4_0 / Q4_1 steps asking L2 for their first weights before the PDL wait (``mmv.WIDE_PREFETCH``),
while wide_x_kernel runs, against none; 4-16 rows of the issue's shapes.
Uses bench/mmv_sweep.py's knob sweep (default route in the same run).

    python bench/results/2026-11-26-session28/prefetch_ab.py OUT.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import common  # noqa: E402
import mmv_sweep  # noqa: E402

VARIANTS = [dict(WIDE_PREFETCH=False), dict(WIDE_PREFETCH=True)]

if __name__ == "__main__":
    copy_bw = common.copy_bandwidth()
    rows = mmv_sweep._knob_sweep(copy_bw, ["Q4_0", "Q4_1"], [4, 8, 16], lambda fmt: VARIANTS, False)
    json.dump(rows, open(sys.argv[1], "w"), indent=1)
