"""Session 28: packed MLX / Q4_K tiles with x rewritten in tile order by a launch before (``mmv.X_TILED``, x then
streamed through the cp.async pipeline) against x loaded a step ahead and reordered in registers; 2-16 rows of the
issue's shapes, with split and stage variants. Uses bench/mmv_sweep.py's knob sweep (default route in the same run).

    python bench/results/2026-11-26-session28/tiled_ab.py OUT.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import common  # noqa: E402
import mmv_sweep  # noqa: E402

VARIANTS = [dict(X_TILED=False), dict(X_TILED=True), dict(X_TILED=True, PROGRAMS_PER_SM=4),
            dict(X_TILED=True, MMV_STAGES_ROWS=4), dict(X_TILED=True, PROGRAMS_PER_SM=1)]

if __name__ == "__main__":
    copy_bw = common.copy_bandwidth()
    rows = mmv_sweep._knob_sweep(copy_bw, ["affine", "Q4_K"], [2, 4, 8, 16], lambda fmt: VARIANTS, False)
    json.dump(rows, open(sys.argv[1], "w"), indent=1)
