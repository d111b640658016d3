"""CPU dry run of the benchmark cases (no timing): every peer must agree with ours.

    python bench/dry_run.py

Shapes are shrunk, torch.compile peers run eagerly and Liger is skipped; this
catches a peer that computes something else before GPU time is spent.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import peers  # noqa: E402

common.DEVICE = "cpu"
peers.compiled = lambda fn: fn
peers.liger.cache_clear()
peers.liger = lambda: None

import activations  # noqa: E402
import norms  # noqa: E402
import rope  # noqa: E402

norms.LARGE = [(33, 256)]
norms.DECODE = [(1, 576)]
activations.GATED_LARGE = [(5, 8192)]
activations.GATED_DECODE = [(1, 300)]
activations.SOFTMAX = [("large", 3, 1000)]


def shrink_rope():
    lig = None
    return [rope._rope_case("large", 2, 5, 4, 2, 64, torch.bfloat16, lig),
            rope._head_norm_rope_case("large", 6, 3, 128, torch.bfloat16, lig)]


rope.cases = shrink_rope

if __name__ == "__main__":
    n = 0
    for module in (norms, rope, activations):
        for case in module.cases():
            errs = common.check_agreement(case)
            n += 1
            print(f"{case.op:16s} {case.shape:24s} " + ", ".join(f"{k}: {v:.1e}" for k, v in errs.items()))
    print(f"{n} cases agree")
