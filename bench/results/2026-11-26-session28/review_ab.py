"""Session 28 review: the wide Q4_0 / Q4_1 steps after the review refactor (each word's scale half chosen before one
conversion, the step's word loads shared) against the package before it: the default route of 4-16 rows of the
issue's shapes. Run once per package (PYTHONPATH), alternated.

    python bench/results/2026-11-26-session28/review_ab.py OUT.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import common  # noqa: E402
import mmv_sweep  # noqa: E402

if __name__ == "__main__":
    copy_bw = common.copy_bandwidth()
    rows = mmv_sweep._knob_sweep(copy_bw, ["Q4_0", "Q4_1"], [4, 8, 16], lambda fmt: [], False)
    json.dump(rows, open(sys.argv[1], "w"), indent=1)
