"""Session 29 (branch x-raw): the packed MLX / Q4_K tiles with x (and MLX scales / biases) loaded a step ahead as
int32 words and unpacked at the top of the next step (run 3's profile: the 16-bit values a step ahead were moved
into the loop's registers at the end of the step, waiting there for their loads), against the package before:
the default route of 2-16 rows of the issue's shapes. Run once per package (PYTHONPATH), alternated.

    python bench/results/2026-11-28-session29/xwords_ab.py OUT.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import common  # noqa: E402
import mmv_sweep  # noqa: E402

if __name__ == "__main__":
    copy_bw = common.copy_bandwidth()
    rows = mmv_sweep._knob_sweep(copy_bw, ["affine", "Q4_K"], [2, 4, 8, 16], lambda fmt: [], False)
    json.dump(rows, open(sys.argv[1], "w"), indent=1)
