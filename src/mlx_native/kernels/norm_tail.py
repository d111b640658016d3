"""``add_rms_norm`` as the tail of a one-row mat-vec launch.

In a decode step every o / down projection is followed by ``add_rms_norm(y, residual, w)``: a launch of its
own for 4096 values. A mat-vec launch can do it itself: each program stores its output rows and counts in on
an arrival counter (``kernels/arrival.py``); the last to arrive has the whole row ``y`` and runs
:func:`add_rms_norm_tail`. Its arithmetic is the norm kernel's (``h = y + residual`` rounded to y's dtype, fp32
sum of squares of the rounded ``h``), so the result equals the two separate ops.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def add_rms_norm_tail(y_ptr, res_ptr, w_ptr, normed_ptr, N, eps, w_offset, CHUNK: tl.constexpr,
                      CHUNKS: tl.constexpr):
    """``h = y + residual`` over the ``N <= CHUNK * CHUNKS`` values at ``y_ptr`` (written by the other programs
    of this launch: read past L1), stored back over ``y``; ``normed = h / rms(h) * (w + w_offset)``."""
    offs = tl.arange(0, CHUNK)
    ss = tl.zeros([CHUNK], dtype=tl.float32)
    for c in tl.static_range(CHUNKS):
        o = c * CHUNK + offs
        ok = o < N
        y = tl.load(y_ptr + o, mask=ok, other=0.0, cache_modifier=".cg").to(tl.float32)
        r = tl.load(res_ptr + o, mask=ok, other=0.0).to(tl.float32)
        h = (y + r).to(y_ptr.dtype.element_ty)
        tl.store(y_ptr + o, h, mask=ok)
        hf = h.to(tl.float32)
        ss += hf * hf
    inv = tl.rsqrt(tl.sum(ss, axis=0) / N + eps)
    for c in tl.static_range(CHUNKS):  # each thread reads back the h values it stored
        o = c * CHUNK + offs
        ok = o < N
        hf = tl.load(y_ptr + o, mask=ok, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + o, mask=ok, other=0.0).to(tl.float32) + w_offset
        tl.store(normed_ptr + o, (hf * inv * w).to(normed_ptr.dtype.element_ty), mask=ok)
