"""Session 29: the packed tensor-core decode mat-vec with equal shares of (tile, step) units per program
(``quant/mmv_shares.py``) against ``mmv_kernel``'s tiles x K splits, at 2-16 rows of the issue's shapes; programs
per SM 3 / 4 / 5. Outputs checked against the default route (``MISMATCH`` lines).

    python bench/results/2026-11-28-session29/shares_ab.py OUT.json [formats] [rows]
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import common  # noqa: E402
import mmv_sweep  # noqa: E402

from mlx_native.ops.quant import mmv, mmv_shares  # noqa: E402


class Knobs:
    """``mmv_sweep`` sets its variants on ``mmv``; the ``SHARES*`` ones live in ``mmv_shares``."""

    def __getattr__(self, name):
        return getattr(mmv_shares if name.startswith("SHARES") else mmv, name)

    def __setattr__(self, name, value):
        setattr(mmv_shares if name.startswith("SHARES") else mmv, name, value)


VARIANTS = [dict(SHARES=False)] + [dict(SHARES=True, SHARES_PER_SM=c) for c in (3, 4, 5)]

if __name__ == "__main__":
    mmv_sweep.mmv = Knobs()
    formats = sys.argv[2].split(",") if len(sys.argv) > 2 else ["affine", "Q4_0", "Q4_1", "Q4_K"]
    ms = [int(r) for r in sys.argv[3].split(",")] if len(sys.argv) > 3 else [2, 4, 8, 16]
    copy_bw = common.copy_bandwidth()
    rows = mmv_sweep._knob_sweep(copy_bw, formats, ms, lambda fmt: VARIANTS, False)
    json.dump(rows, open(sys.argv[1], "w"), indent=1)
