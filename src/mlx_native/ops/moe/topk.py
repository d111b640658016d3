"""Top-k expert choice of rows of router logits, inside a kernel (``moe_route``'s).

Scores are ``softmax(z)`` or ``sigmoid(z)``; the experts with the largest ``score + bias`` win, ties to the
lower id. One round per chosen expert takes the max of a packed int64 key (the score's order-preserving
int32 image in the high half, ``BE - 1 - id`` in the low half), so a round is one reduction; without a bias
the chosen score is read back from the key itself.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernels.math import sigmoid

_TAKEN = tl.constexpr(-9223372036854775808)  # int64 min: below every key


@triton.jit
def _order_bits(v):
    """float32 -> int32 whose signed order is the floats' order (an involution on the bits)."""
    bits = v.to(tl.int32, bitcast=True)
    return bits ^ ((bits >> 31) & 0x7FFFFFFF)


@triton.jit
def route_rows(z, bias_ptr, cols, col_ok, TOPK: tl.constexpr, BKP: tl.constexpr, BE: tl.constexpr,
               SIGMOID: tl.constexpr, RENORM: tl.constexpr, HAS_BIAS: tl.constexpr):
    """``z [BR, BE]`` float32 logits (``col_ok [BE]``: the real experts) -> ``(ids, weights)``, ``[BR, BKP]``
    int32 / float32 in rank order; slots past ``TOPK`` hold 0."""
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
    key = (_order_bits(sel).to(tl.int64) << 32) | (BE - 1 - cols)[None, :].to(tl.int64)
    slots = tl.arange(0, BKP)[None, :]
    got_ids = tl.zeros([z.shape[0], BKP], dtype=tl.int32)
    got_w = tl.zeros([z.shape[0], BKP], dtype=tl.float32)
    for j in tl.static_range(TOPK):
        best = tl.max(key, axis=1)
        idx = BE - 1 - (best & 0xFFFFFFFF).to(tl.int32)
        hit = key == best[:, None]
        if HAS_BIAS:
            wj = tl.sum(tl.where(hit, p, 0.0), axis=1)
        else:  # the score is the key's high half
            wj = _order_bits((best >> 32).to(tl.int32)).to(tl.float32, bitcast=True)
        got_ids = tl.where(slots == j, idx[:, None], got_ids)
        got_w = tl.where(slots == j, wj[:, None], got_w)
        key = tl.where(hit, _TAKEN, key)
    if RENORM:
        got_w = got_w / tl.sum(got_w, axis=1)[:, None]
    return got_ids, got_w
