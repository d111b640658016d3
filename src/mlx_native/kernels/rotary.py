"""Rotary embedding of a register tile, for kernels that rotate what they load (fused decode attention).

``ops/rope`` rotates whole tensors; these helpers rotate a ``[R, BLOCK_D]`` tile of head rows inside a consumer:
:func:`rope_operands` loads each column with its rotation partner (``d ± dims/2`` in the NeoX half-split layout,
``d ^ 1`` in the traditional interleaved one) and the inverse frequencies, :func:`rope_rotate` combines them
(so a kernel can issue the loads early and rotate later). The arithmetic is the rope kernel's
(``theta = (pos * scale) * inv_freq`` in fp32, :func:`~.math.sincos`), so a tile rotated here rounds like
``mn.rope`` on the same rows.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .math import sincos


@triton.jit
def _pairing(offs_d, rope_half, TRADITIONAL: tl.constexpr):
    """Per column: ``(partner column, angle index, lead)``; ``lead``: the first column of its pair."""
    if TRADITIONAL:
        return offs_d ^ 1, offs_d // 2, (offs_d % 2) == 0
    lead = offs_d < rope_half
    return tl.where(lead, offs_d + rope_half, offs_d - rope_half), tl.where(lead, offs_d, offs_d - rope_half), lead


@triton.jit
def rope_operands(base, row_off, row_ok, offs_d, d_ok, freq_ptr, rope_half, HAS_FREQS: tl.constexpr,
                  TRADITIONAL: tl.constexpr):
    """Loads for :func:`rope_rotate`: ``(x, x_partner)`` fp32 ``[R, BLOCK_D]`` of the rows at
    ``base + row_off [R]`` (unit column stride; 0 past ``row_ok`` / ``d_ok``) and the fp32 inverse frequency
    of each column ``[BLOCK_D]``. ``freq_ptr``: ``[rope_half]`` fp32 inverse frequencies, or MLX ``freqs``
    (HAS_FREQS: ``1 / freqs``)."""
    partner, j, _ = _pairing(offs_d, rope_half, TRADITIONAL)
    rot = offs_d < 2 * rope_half
    ptrs = base + row_off[:, None]
    x = tl.load(ptrs + offs_d[None, :], mask=row_ok[:, None] & d_ok[None, :], other=0.0).to(tl.float32)
    xp = tl.load(ptrs + partner[None, :], mask=row_ok[:, None] & rot[None, :], other=0.0).to(tl.float32)
    if HAS_FREQS:
        inv = tl.math.div_rn(1.0, tl.load(freq_ptr + j, mask=rot, other=1.0).to(tl.float32))
    else:
        inv = tl.load(freq_ptr + j, mask=rot, other=0.0)
    return x, xp, inv


@triton.jit
def rope_rotate(x, xp, inv, pos, offs_d, rope_half, scale, TRADITIONAL: tl.constexpr, ROW_POS: tl.constexpr):
    """The first ``2 * rope_half`` columns of ``x`` rotated (fp32 ``[R, BLOCK_D]``) at positions ``pos``: one
    per row (ROW_POS, int ``[R]``) or one for all rows (an int scalar: the angles are computed once per column)."""
    _, _, lead = _pairing(offs_d, rope_half, TRADITIONAL)
    if ROW_POS:
        theta = (pos.to(tl.float32) * scale)[:, None] * inv[None, :]
    else:
        theta = ((pos.to(tl.float32) * scale) * inv)[None, :]
    s, c = sincos(theta)
    # lead column a of a pair: a cos - b sin; its partner b: b cos + a sin
    rotated = x * c + tl.where(lead[None, :], -xp, xp) * s
    return tl.where((offs_d < 2 * rope_half)[None, :], rotated, x)
