"""Top-k expert routing of router logits, as a device function shared by the route kernel and the one-launch
MoE step."""

import triton
import triton.language as tl

from ...kernels.math import sigmoid


@triton.jit
def route_rows(z, bias_ptr, cols, col_ok, TOPK: tl.constexpr, SIGMOID: tl.constexpr, RENORM: tl.constexpr,
               HAS_BIAS: tl.constexpr, BKP: tl.constexpr):
    """``TOPK`` rounds of (max, lowest id among the maxima) per row of the logits ``z [R, BE]`` (fp32, finite
    or -inf past ``col_ok``): ``(ids [R, BKP] int32, weights [R, BKP] fp32)``, slots past ``TOPK`` zero."""
    if SIGMOID:
        p = sigmoid(z)
    else:
        mx = tl.max(z, axis=1)
        ez = tl.exp(z - mx[:, None])
        p = ez / tl.sum(ez, axis=1)[:, None]
    p = tl.where(col_ok[None, :], p, 0.0)
    sel = p
    if HAS_BIAS:
        sel = p + tl.load(bias_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    sel = tl.where(col_ok[None, :], sel, float("-inf"))
    slots = tl.arange(0, BKP)
    got_ids = tl.zeros([z.shape[0], BKP], dtype=tl.int32)
    got_w = tl.zeros([z.shape[0], BKP], dtype=tl.float32)
    for j in tl.static_range(TOPK):
        best = tl.max(sel, axis=1)
        # the lowest id among the maxima
        idx = tl.min(tl.where(sel == best[:, None], cols[None, :], z.shape[1]), axis=1)
        hit = cols[None, :] == idx[:, None]
        wj = tl.sum(tl.where(hit, p, 0.0), axis=1)
        got_ids = tl.where(slots[None, :] == j, idx[:, None], got_ids)
        got_w = tl.where(slots[None, :] == j, wj[:, None], got_w)
        sel = tl.where(hit, float("-inf"), sel)
    if RENORM:
        got_w = got_w / tl.sum(got_w, axis=1)[:, None]
    return got_ids, got_w
