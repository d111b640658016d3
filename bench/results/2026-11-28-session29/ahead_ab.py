"""Session 29 (branch x-ahead): the packed MLX / Q4_K tiles with x loaded two steps ahead (``mmv.X_AHEAD``) and
the MLX scale / bias pairs formed a step ahead (``mmv.SB_PAIRS``), against the defaults (run 3's profile: 28% of
the stall samples wait on x's load of the step before, 12% on the scales' layout conversion). 2-16 rows of the
issue's shapes, outputs checked against the default route.

    python bench/results/2026-11-28-session29/ahead_ab.py OUT.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import common  # noqa: E402
import mmv_sweep  # noqa: E402


def variants(fmt):
    sets = [(1, False), (2, False)] + ([(1, True), (2, True)] if fmt == "affine" else [])
    return [dict(X_AHEAD=a, SB_PAIRS=p) for a, p in sets]


if __name__ == "__main__":
    copy_bw = common.copy_bandwidth()
    rows = mmv_sweep._knob_sweep(copy_bw, ["affine", "Q4_K"], [2, 4, 8, 16], variants, False)
    json.dump(rows, open(sys.argv[1], "w"), indent=1)
