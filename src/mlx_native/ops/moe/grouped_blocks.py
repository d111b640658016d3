"""Expert-grouped tensor-core matmul on GGUF Q8_0 and Q6_K experts (MoE prefill), the blocks read as int32 words.

Routed rows are grouped by expert into blocks of ``MP`` rows (:class:`~mlx_native.ops.quant.grouping.RowGrouping`),
as for :mod:`.grouped`'s kernel; program ``(tile, block)`` runs ``BN`` output rows of its expert over K in steps of
128 values: the step's bytes of every row are loaded as int32 words, decoded in fp32 (llama.cpp's arithmetic, exact),
rounded once to x's dtype and multiplied with the block's x rows on tensor cores, two dots of 64 values. The loads of
the next step are issued before this step's decode.

Why words: Q8_0 blocks (34 bytes) and Q6_K super-blocks (210 bytes) are only 2-byte aligned, so a byte-wise tile
(``ggml/tiles.py``) puts every byte in its own register: the tiled kernel (``qmm.qmm_kernel``) used 255 registers on
them and spilled with an up projection (sm_90 SASS, triton 3.6), and took 1.0-20 ms for Qwen3-30B-A3B's experts where
dequantizing them to bf16 first took 0.35-0.86 ms (H200, session 34 run 2). A run of bytes at an even offset ``o``
is read as the aligned words from ``o // 4`` and the next ones, joined by a funnel shift of 0 or 16 bits (``shf.r``).

Steps (128 values of a row; plane ``p`` is values ``64 p .. 64 p + 63`` as ``[2, 8, 4]``: part, word, byte):

* Q8_0: blocks ``4 s .. 4 s + 3`` (34 bytes: fp16 ``d``, 32 int8 codes); plane ``p`` holds blocks ``2 p``,
  ``2 p + 1``; ``v = d q``.
* Q6_K: half ``h = s % 2`` of super-block ``s // 2`` (``ql`` 128 bytes of low nibbles, ``qh`` 64 bytes of 2-bit
  pairs, 16 int8 scales, fp16 ``d`` at 208). Value ``l = 32 a + 4 b + i`` of the half (``a`` = 0-3) is the nibble
  ``a // 2`` of ``ql`` byte ``64 h + 32 (a % 2) + 4 b + i`` with bits ``2 a`` of ``qh`` byte ``32 h + 4 b + i`` above
  it, scale ``8 h + 2 a + b // 4``; ``v = (d sc) (q - 32)``; plane ``p`` is ``a = 2 p, 2 p + 1``.
"""

from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl

from ...kernels.launch import Launch
from ...runtime import env
from ...runtime.memory import empty
from ..ggml import formats
from ..quant.grouping import RowGrouping
from ..quant.qmm import store_result
from ..quant.tiles import codes_to_f32
from .grouped import MIN_ROWS, block_rows

Q8_0: tl.constexpr = tl.constexpr(8)
Q6_K: tl.constexpr = tl.constexpr(14)
TYPES = (8, 14)


@triton.jit
def _funnel(lo, hi, sh, ASM: tl.constexpr):
    """``(hi:lo) >> sh`` for ``sh`` 0 or 16 (int32 words; one ``shf.r.clamp`` with ``ASM``)."""
    if ASM:
        return tl.inline_asm_elementwise("shf.r.clamp.b32 $0, $1, $2, $3;", "=r,r,r,r", [lo, hi, sh],
                                         dtype=tl.int32, is_pure=True, pack=1)
    return tl.where(sh == 0, lo, ((lo >> 16) & 0xFFFF) | (hi << 16))


@triton.jit
def _words(w_ptr, off, sh, mask, ASM: tl.constexpr):
    """The int32 words of the bytes at even byte offsets ``off`` (any shape; ``sh``: ``(off % 4) * 8`` broadcast to
    it), 0 where ``mask`` is False."""
    wp = w_ptr.to(tl.pointer_type(tl.int32)) + (off >> 2)
    lo = tl.load(wp, mask=mask, other=0)
    hi = tl.load(wp + 1, mask=mask & (sh != 0), other=0)
    return _funnel(lo, hi, sh, ASM)


@triton.jit
def _f16_at(w_ptr, off, mask):
    return tl.load((w_ptr + off).to(tl.pointer_type(tl.uint16)), mask=mask, other=0).to(tl.float16, bitcast=True) \
        .to(tl.float32)


@triton.jit
def _step_load(w_ptr, row_off, s, ok, FMT: tl.constexpr, ASM: tl.constexpr):
    """Step ``s``'s raw words of the rows at byte offsets ``row_off [BN]`` (``ok [BN]``: rows to read):
    Q8_0 ``(codes [BN, 4, 8], d [BN, 4], -, -)``; Q6_K ``(ql [BN, 2, 8], qh [BN, 8], scale words [BN, 2], d [BN])``."""
    b8 = tl.arange(0, 8)
    if FMT == Q8_0:
        blk = row_off[:, None] + (4 * s + tl.arange(0, 4))[None, :].to(tl.int64) * 34  # [BN, 4]
        m2 = ok[:, None] & (blk == blk)
        off = blk[:, :, None] + 2 + 4 * b8[None, None, :]
        codes = _words(w_ptr, off, ((blk + 2) % 4 * 8).to(tl.int32)[:, :, None] + 0 * b8[None, None, :],
                       m2[:, :, None], ASM)
        return codes, _f16_at(w_ptr, blk, m2), codes, codes
    else:
        h = s % 2
        blk = row_off + (s // 2) * 210  # [BN] (int64 row offsets)
        sh = (blk % 4 * 8).to(tl.int32)
        part = tl.arange(0, 2)
        off = blk[:, None, None] + 64 * h + 32 * part[None, :, None] + 4 * b8[None, None, :]
        ql = _words(w_ptr, off, sh[:, None, None] + 0 * off.to(tl.int32), ok[:, None, None], ASM)
        off_h = blk[:, None] + 128 + 32 * h + 4 * b8[None, :]
        qh = _words(w_ptr, off_h, sh[:, None] + 0 * off_h.to(tl.int32), ok[:, None], ASM)
        off_s = blk[:, None] + 192 + 8 * h + 4 * part[None, :]
        sc = _words(w_ptr, off_s, sh[:, None] + 0 * off_s.to(tl.int32), ok[:, None], ASM)
        return ql, qh, sc, _f16_at(w_ptr, blk + 208, ok)


@triton.jit
def _i8(v, shift):
    """The int8 in bits ``shift .. shift + 7`` of the int32 ``v``, sign-extended."""
    return (v << (24 - shift)) >> 24


@triton.jit
def _plane(t0, t1, t2, t3, P: tl.constexpr, FMT: tl.constexpr, DT: tl.constexpr):
    """Plane ``P`` (values ``64 P .. 64 P + 63`` of the step) of :func:`_step_load`'s words -> ``[BN, 64]`` in ``DT``."""
    BN: tl.constexpr = t0.shape[0]
    i8 = 8 * tl.arange(0, 4)[None, None, None, :]  # byte i of a word: bits 8 i
    if FMT == Q8_0:
        wa, wb = tl.split(tl.permute(tl.reshape(t0, (BN, 2, 2, 8)), (0, 2, 3, 1)))  # blocks 0-1, 2-3: [BN, 2, 8]
        da, db = tl.split(tl.permute(tl.reshape(t1, (BN, 2, 2)), (0, 2, 1)))
        if P == 0:
            w, dp = wa, da
        else:
            w, dp = wb, db
        v = _i8(w[:, :, :, None], i8).to(tl.float32) * dp[:, :, None, None]
    else:
        a = (2 * P + tl.arange(0, 2))[None, :, None, None]  # the quarter of the half: qh bits 2 a
        q = ((t0[:, :, :, None] >> (i8 + 4 * P)) & 15) | (((t1[:, None, :, None] >> (i8 + 2 * a)) & 3) << 4)
        s_lo, s_hi = tl.split(t2)  # [BN]: scales 8 h .. 8 h + 3, 8 h + 4 .. 8 h + 7
        if P == 0:
            sw = s_lo
        else:
            sw = s_hi
        # scale 2 a' + b // 4 of the word (a' the part): byte 2 a' + b // 4
        sb = 8 * (2 * tl.arange(0, 2)[None, :, None] + tl.arange(0, 8)[None, None, :] // 4)  # [1, 2, 8]
        dsc = t3[:, None, None] * _i8(sw[:, None, None], sb).to(tl.float32)  # [BN, 2, 8]
        v = dsc[:, :, :, None] * (codes_to_f32(q) - 32.0)
    return tl.reshape(v, (BN, 64)).to(DT)


@triton.jit
def grouped_blocks_kernel(
    x_ptr,  # [X, K] activations, bf16 / fp16 (row stride stride_xm)
    rows_ptr, bexp_ptr,  # RowGrouping's slots and block experts (as grouped.grouped_mmv_kernel's)
    w_ptr, w2_ptr,  # [E, N, row_bytes] raw blocks (16-byte aligned; w2: the up projection)
    out_ptr,  # [R, N]
    N, K, stride_xm, x_div, stride_we, row_bytes, n_experts,
    FMT: tl.constexpr, BN: tl.constexpr, MP: tl.constexpr, HAS_UP: tl.constexpr, ACT: tl.constexpr,
    ASM: tl.constexpr, PREFETCH: tl.constexpr = True,
):
    """``out[r] = x[r // x_div] @ W_e.T`` for the rows of each block (``HAS_UP``: ``act(x Wg^T) * (x Wu^T)``);
    expert ids outside ``[0, E)`` give NaN rows."""
    pid_n = tl.program_id(0)
    blk = tl.program_id(1)
    e = tl.load(bexp_ptr + blk)
    if e > n_experts:  # past the last block in use
        return
    bad = e == n_experts
    e = tl.where(bad, 0, e).to(tl.int64)
    m = tl.arange(0, MP)
    r = tl.load(rows_ptr + blk * MP + m)
    ok = r >= 0
    r = tl.where(ok, r, 0)
    xrow = x_ptr + (r // x_div).to(tl.int64) * stride_xm
    cols = pid_n * BN + tl.arange(0, BN)
    col_ok = cols < N
    row_off = e * stride_we + tl.where(col_ok, cols, 0).to(tl.int64) * row_bytes
    DT: tl.constexpr = x_ptr.dtype.element_ty
    acc = tl.zeros([BN, MP], dtype=tl.float32)
    acc2 = tl.zeros([BN, MP], dtype=tl.float32)
    kk = tl.arange(0, 64)
    n_steps = K // 128
    a0, a1, a2, a3 = _step_load(w_ptr, row_off, 0, col_ok, FMT, ASM)
    u0, u1, u2, u3 = a0, a1, a2, a3
    if HAS_UP:
        u0, u1, u2, u3 = _step_load(w2_ptr, row_off, 0, col_ok, FMT, ASM)
    for s in range(n_steps):
        if not PREFETCH:
            a0, a1, a2, a3 = _step_load(w_ptr, row_off, s, col_ok, FMT, ASM)
            if HAS_UP:
                u0, u1, u2, u3 = _step_load(w2_ptr, row_off, s, col_ok, FMT, ASM)
        more = col_ok & (cols * 0 + s + 1 < n_steps)  # (a tensor: the interpreter takes no scalar bool in a mask)
        n0, n1, n2, n3 = a0, a1, a2, a3
        m0, m1, m2, m3 = u0, u1, u2, u3
        if PREFETCH:
            n0, n1, n2, n3 = _step_load(w_ptr, row_off, s + 1, more, FMT, ASM)
            if HAS_UP:
                m0, m1, m2, m3 = _step_load(w2_ptr, row_off, s + 1, more, FMT, ASM)
        xa = tl.load(xrow[None, :] + (128 * s + kk)[:, None], mask=ok[None, :], other=0.0)  # [64, MP]
        xb = tl.load(xrow[None, :] + (128 * s + 64 + kk)[:, None], mask=ok[None, :], other=0.0)
        acc = tl.dot(_plane(a0, a1, a2, a3, 0, FMT, DT), xa, acc)
        acc = tl.dot(_plane(a0, a1, a2, a3, 1, FMT, DT), xb, acc)
        if HAS_UP:
            acc2 = tl.dot(_plane(u0, u1, u2, u3, 0, FMT, DT), xa, acc2)
            acc2 = tl.dot(_plane(u0, u1, u2, u3, 1, FMT, DT), xb, acc2)
        a0, a1, a2, a3 = n0, n1, n2, n3
        u0, u1, u2, u3 = m0, m1, m2, m3
    acc = tl.where(bad, float("nan"), acc)
    out_off = r[None, :].to(tl.int64) * N + cols[:, None]
    store_result(out_ptr, out_ptr, out_ptr, out_ptr, acc, acc2, out_off, col_ok[:, None] & ok[None, :], 0, False,
                 False, HAS_UP, ACT)


# (BN, warps, stages) by block rows: not swept yet.
CONFIG = {16: (64, 4, 2), 32: (64, 4, 2), 64: (64, 4, 2)}
CONFIG_OVERRIDE: Optional[tuple] = None  # (MP, BN, warps, stages) for sweeps (bench/moe_formats_sweep.py)
PREFETCH = True  # the next step's words loaded before this step's decode


def supports(type_id: int, n_rows: int, k: int, x_dtype: torch.dtype) -> bool:
    """Whether an expert call comes here: GGUF Q8_0 or Q6_K (``k`` a multiple of 128 / 256), bf16 / fp16 x, at
    least ``grouped.MIN_ROWS`` rows (``MLX_NATIVE_MMV=off`` turns it off)."""
    if env.settings.mmv == "off" or n_rows < MIN_ROWS or x_dtype not in (torch.bfloat16, torch.float16):
        return False
    return type_id in TYPES and k % (256 if type_id == 14 else 128) == 0


class BlocksGroupedLaunch:
    """:func:`grouped_blocks_kernel` for ``n_rows`` routed rows against GGUF experts stacked ``[E, n, k]``.

    Args:
        type_id: ggml type (Q8_0 or Q6_K). x_div: routed rows per x row. stride_xm: x's row stride. act:
            ``qmm.ACT_CODES`` code of a fused gate/up pair (``None``: one matrix).

    Call with ``(x, erow, raw, raw_up)`` (``erow [n_rows]`` expert of each routed row, ``raw`` 16-byte aligned) ->
    ``[n_rows, n]``.
    """

    def __init__(self, type_id: int, n: int, k: int, n_rows: int, n_experts: int, x_div: int, x_dtype: torch.dtype,
                 stride_xm: int, device, act: Optional[int] = None):
        mp = block_rows(n_rows, n_experts)
        bn, warps, stages = CONFIG[mp]
        if CONFIG_OVERRIDE is not None:
            mp, bn, warps, stages = CONFIG_OVERRIDE
        self.n, self.n_rows, self.x_dtype, self.device = n, n_rows, x_dtype, device
        rb = formats.row_bytes(formats.BY_ID[type_id], k)
        self.ints = (n, k, stride_xm, x_div, n * rb, rb, n_experts)
        self.grouping = RowGrouping(n_rows, n_experts, mp, device)
        self.launch = Launch(grouped_blocks_kernel, (triton.cdiv(n, bn), self.grouping.max_blocks), dict(
            FMT=type_id, BN=bn, MP=mp, HAS_UP=act is not None, ACT=act or 0, ASM=not env.settings.triton_interpret,
            PREFETCH=PREFETCH),
            num_warps=warps, num_stages=stages)

    def __call__(self, x, erow, raw, raw_up=None) -> torch.Tensor:
        rows, bexp, _ = self.grouping(erow)
        out = empty((self.n_rows, self.n), dtype=self.x_dtype, device=self.device)
        self.launch(x, rows, bexp, raw, raw if raw_up is None else raw_up, out, *self.ints)
        return out
