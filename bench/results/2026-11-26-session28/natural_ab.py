"""Session 28: wide Q4_0 steps with the code words rebuilt in block order in registers (``mmv.Q40_NATURAL``: x as
``_x_step`` orders it, no x launch) against x rewritten by ``wide_x_kernel``; 3-16 rows of the issue's shapes.
Uses bench/mmv_sweep.py's knob sweep (default route in the same run).

    python bench/results/2026-11-26-session28/natural_ab.py OUT.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import common  # noqa: E402
import mmv_sweep  # noqa: E402

VARIANTS = [dict(Q40_NATURAL=False), dict(Q40_NATURAL=True), dict(Q40_NATURAL=True, MMV_STAGES_ROWS=4)]

if __name__ == "__main__":
    copy_bw = common.copy_bandwidth()
    rows = mmv_sweep._knob_sweep(copy_bw, ["Q4_0"], [3, 4, 8, 16], lambda fmt: VARIANTS, False)
    json.dump(rows, open(sys.argv[1], "w"), indent=1)
