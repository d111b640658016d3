"""Session 28: packed MLX / Q4_K / Q4_0 tiles at up to 8 rows of x with x tiles of 8 rows (``mmv.MP8``: the dot's
N) against 16; 2, 4 and 8 rows of the issue's shapes. Uses bench/mmv_sweep.py's knob sweep (default route in the
same run).

    python bench/results/2026-11-26-session28/mp8_ab.py OUT.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import common  # noqa: E402
import mmv_sweep  # noqa: E402

VARIANTS = [dict(MP8=False), dict(MP8=True)]

if __name__ == "__main__":
    copy_bw = common.copy_bandwidth()
    rows = mmv_sweep._knob_sweep(copy_bw, ["affine", "Q4_K", "Q4_0"], [2, 4, 8], lambda fmt: VARIANTS, False)
    json.dump(rows, open(sys.argv[1], "w"), indent=1)
