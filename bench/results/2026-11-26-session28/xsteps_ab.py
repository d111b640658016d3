"""Session 28: wide Q4_0 / Q4_1 steps : wide_x_kernel with 16, 4 or 1 steps of a row per program (``mmv.WIDE_X_STEPS``);
4-16 rows of the issue's shapes.
Uses bench/mmv_sweep.py's knob sweep (default route in the same run).

    python bench/results/2026-11-26-session28/xsteps_ab.py OUT.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import common  # noqa: E402
import mmv_sweep  # noqa: E402

VARIANTS = [dict(WIDE_X_STEPS=16), dict(WIDE_X_STEPS=4), dict(WIDE_X_STEPS=1)]

if __name__ == "__main__":
    copy_bw = common.copy_bandwidth()
    rows = mmv_sweep._knob_sweep(copy_bw, ["Q4_0", "Q4_1"], [4, 8, 16], lambda fmt: VARIANTS, False)
    json.dump(rows, open(sys.argv[1], "w"), indent=1)
