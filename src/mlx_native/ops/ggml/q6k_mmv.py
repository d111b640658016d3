"""Decode matmul on tensor cores for GGUF Q6_K weights and a few rows of x (``ROWS_MIN`` to ``ROWS_MAX``).

``out[m, n] = sum_k x[m, k] w[n, k]`` with ``w = d sc (q - 32)`` (llama.cpp's Q6_K: 210-byte super-blocks of 256
values, bytes 0-127 low nibbles ``ql``, 128-191 high bit pairs ``qh``, 192-207 int8 scales, 208-209 fp16 ``d``;
value ``128 h + l + 64 t`` of half ``h`` (``l`` 0-63, ``t`` 0-1) takes nibble ``t`` of ql byte ``64 h + l``, bits
``2 (l // 32) + 4 t`` of qh byte ``32 h + l % 32`` and scale ``value // 16``).

The streamed Q6_K kernels (``q6k_idot``, ``q6k_mv``) decode every code once per row of x; at 5-16 rows their cost
grows with the rows (4 rows 36.6 us against 20.1 at one row on 4096 x 14336, H200), and the tiled decode kernel took
65-108 us. Here each code is decoded once, to a 16-bit weight in x's dtype, and the rows of x cost tensor-core
multiply-adds, as ``quant/mmv.py`` does for 4-bit weights.

Steps and alignment. A loop step is half a super-block (128 values: 64 ql bytes, 32 qh bytes, 8 scales), the
steps of one split in order. Super-blocks are 210 bytes, so each starts 4-byte aligned or two bytes past it (``mis``,
per row and super-block: rows of an odd number of super-blocks alternate too); every field is read as the int32
words from the one holding its first byte, each joined with the next word by a funnel shift of 0 or 16 bits (``shf``;
two loads, the second one word on only where ``mis``). ``PREFETCH`` (:func:`prefetch_rule`): the next step's words are
loaded before this step is decoded (registers; taken at the top of the next step through ``kernels.loads.pinned``).

Decoding, per ql word ``j = 8 c0 + f`` of a half (bytes ``l = 32 c0 + 4 f .. + 3``) and shift ``4 i`` (``i = 2 i1 +
i0``: nibble ``i0`` of bytes ``i1`` and ``i1 + 2``): ``(ql >> 4 i) & 0x000F000F`` is the low four bits of two codes,
one per 16-bit half, and qh word ``f`` shifted by ``2 c0`` holds their high pairs at bits ``4 i`` and ``4 i + 16``;
with the magic exponent of ``quant/mmv.py`` the pair is two 16-bit floats ``OFF + q`` exactly, ``(OFF + q) - (OFF +
32)`` is ``q - 32`` exactly and ``(q - 32) S`` (``S = d sc`` rounded to x's dtype once per 16 values) rounds once:
two codes an instruction in PTX (``bf16x2`` / ``f16x2`` FMAs; the interpreter runs the same math in fp32). Each weight
is rounded twice (``S``, then the product), as ``mmv``'s Q4_K tiles. The pairs form ``mmv``'s tile
(:func:`~mlx_native.ops.quant.mmv._tile`, each thread's register pairs from its own words): column ``((i 4 + f4) 4 +
c) 2 + e`` holds the half's value ``64 i0 + 16 c + 4 f4 + 2 e + i1`` (word ``4 c + f4``), and x is reordered in
registers to match (:func:`_x_order_half`).

Grid: axis 0 tiles of ``BN`` output features, axis 1 a K split in whole steps, summed in the launch by the last split
of each tile to arrive (``qmm.store_result``; ``qmm.SplitK`` owns the counters). x rows are padded to ``MP`` (8 or
16, the dot's N); rows ``>= M`` are masked loads and never stored. x is read as int32 words (an even row stride) a
step ahead, unpacked at the top of the next step, as in ``mmv``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...kernels.dependent import dependent_launch, enter
from ...kernels.loads import pinned
from ...kernels.words import half16, word_aligned
from ...runtime import env
from ...runtime.device import device_info
from ...runtime.memory import empty
from ..quant.mmv import _pair16, _tile, _x_load, split_rule
from ..quant.qmm import SplitK, run_split, store_result

Q6K_ID = 14
STEP_VALUES = 128  # a loop step: half a super-block
# Session 40 run 3 (H200, us, this kernel against the route before it: q6k_idot's rows at 2-4 rows, 4-row slices at
# 5-8, the tiled decode kernel at 9-16; K x N 4096 x 14336 / 14336 x 4096 / 4096 x 4096 / the 4096 x 128256 head):
# 4 rows 33.1 / 33.4 / 12.4 / 235.5 against 36.4 / 39.8 / 16.6 / 286.1; 5 rows 33.1 / 33.6 / 12.4 / 235.4 against
# 74.3 / 90.0 / 25.3 / 482.0; 8 rows 33.4 / 33.6 / 12.4 / 234.6 against 74.8 / 81.2 / 33.2 / 577.7; 16 rows 35.9 /
# 35.5 / 13.5 / 239.5 against 107.6 / 90.3 / 32.4 / 775.7 (dequantize + cuBLAS 97 / 96 / 30 / 806; one row 19.8 /
# 20.8 / 8.4 / 128.8). At 3 rows q6k_idot's rows are ahead on 4096 x 14336 (30.5 against 33.1).
ROWS_MIN = 4  # rows of x from which ggml_matmul takes this kernel
ROWS_MAX = 16
BN = 64  # output features per program
WARPS = 4
STAGES = 1  # session 40 run 2: the cp.async pipeline of 4-byte pieces spilled (3 stages 3.2x slower than 1)
PROGRAMS_PER_SM = 4  # split K until about this many programs per SM (run 3: 4096 x 14336 33.1 against 36.0 with 2)
MIN_STEPS = 4  # loop steps per split at least


def prefetch_rule(m: int, split: int) -> bool:
    """Whether the loop loads the next step's words a step ahead (``PREFETCH``). Run 3: on for the head's 2004 tiles
    (no K split: 235 against 249 us) and at 9-16 rows (x tiles of 16: 4096 x 14336 35.9 against 37.3, 14336 x 4096
    35.5 against 36.9, 4096 x 4096 14.3 against 13.5); off for 4-8 rows of a split K (33.1 against 33.9, 33.6
    against 34.7, 12.4 against 14.0)."""
    return split == 1 or m > 8

# ``(OFF + q) - (OFF + 32)`` is ``q - 32`` exactly, and ``(q - 32) S`` (an FMA with -0.0) rounds once: a pair of
# dequantized Q6_K weights, ``$1`` two codes with the magic exponent, ``$2`` the scale in both halves.
_Q6_BF16 = tl.constexpr("""{ .reg .b32 t, one, off, nz;
 mov.b32 one, 0x3F803F80; mov.b32 off, 0xC320C320; mov.b32 nz, 0x80008000;
 fma.rn.bf16x2 t, $1, one, off;
 fma.rn.bf16x2 $0, t, $2, nz; }""")
_Q6_F16 = tl.constexpr("""{ .reg .b32 t, one, off, nz;
 mov.b32 one, 0x3C003C00; mov.b32 off, 0xE420E420; mov.b32 nz, 0x80008000;
 fma.rn.f16x2 t, $1, one, off;
 fma.rn.f16x2 $0, t, $2, nz; }""")


@triton.jit
def _funnel(a, b, sh, ASM: tl.constexpr):
    """The low word of ``(b : a) >> sh`` (``sh`` 0 or 16, ``[BN, 1]``): ``a``, or its high half joined with ``b``'s
    low half."""
    sh = tl.broadcast_to(sh, a.shape)
    if ASM:
        return tl.inline_asm_elementwise("shf.r.clamp.b32 $0, $1, $2, $3;", "=r,r,r,r", [a, b, sh], dtype=tl.int32,
                                         is_pure=True, pack=1)
    return (((a.to(tl.int64) & 0xFFFFFFFF) | (b.to(tl.int64) << 32)) >> sh.to(tl.int64)).to(tl.int32)


@triton.jit
def _step_loads(wp, row_byte, u):
    """The words of step ``u`` (half ``u % 2`` of super-block ``u // 2``) of the rows at byte ``row_byte [BN]``:
    ``(ql, ql1, qh, qh1, sc, sc1, dw, sh)`` -- each field's words from the one holding its first byte and the words
    one on (the same words where the super-block is 4-byte aligned), the word holding ``d``, the funnel shift
    ``[BN, 1]``."""
    byte = row_byte + 210 * (u // 2)
    w0 = byte >> 2
    mis = (byte >> 1) & 1
    h = u % 2
    ql = wp + (w0 + 16 * h)[:, None] + tl.arange(0, 16)[None, :]
    qh = wp + (w0 + 32 + 8 * h)[:, None] + tl.arange(0, 8)[None, :]
    sc = wp + (w0 + 48 + 2 * h)[:, None] + tl.arange(0, 2)[None, :]
    one = mis[:, None]
    return (tl.load(ql), tl.load(ql + one), tl.load(qh), tl.load(qh + one), tl.load(sc), tl.load(sc + one),
            tl.load(wp + w0 + 52), 16 * one)


@triton.jit
def _q6_pairs(code, S2, X_F16: tl.constexpr, ASM: tl.constexpr):
    """``[BN, 16, 4]`` code pairs with the magic exponent, ``S2 [BN, 16, 4]`` (:func:`_pair16` of the scales) ->
    ``[BN, 16, 4, 2]`` weights ``(q - 32) S`` in x's dtype (half ``e`` of each pair)."""
    dt: tl.constexpr = tl.float16 if X_F16 else tl.bfloat16
    if ASM:
        d = tl.inline_asm_elementwise(_Q6_F16 if X_F16 else _Q6_BF16, "=r,r,r", [code, S2], dtype=tl.int32,
                                      is_pure=True, pack=1)
        return tl.join(d.to(tl.int16).to(dt, bitcast=True), (d >> 16).to(tl.int16).to(dt, bitcast=True))
    S = S2.to(tl.int16).to(dt, bitcast=True).to(tl.float32)
    lo = ((code & 0x3F) - 32).to(tl.float32)
    hi = (((code >> 16) & 0x3F) - 32).to(tl.float32)
    return tl.join((lo * S).to(dt), (hi * S).to(dt))


@triton.jit
def _x_order_half(xn, DT: tl.constexpr):
    """x of a step as loaded (``[MP, 64]`` int32 words, values in order) -> ``[128, MP]`` in the tile's column order:
    value ``64 i0 + 32 c1 + 16 c0 + 4 f4 + 2 e + i1`` to column ``(((2 i1 + i0) 4 + f4) 4 + 2 c1 + c0) 2 + e``."""
    MP: tl.constexpr = xn.shape[0]
    x = tl.reshape(tl.join(half16(xn, 0, DT), half16(xn, 16, DT)), (MP, 128))
    return tl.reshape(tl.permute(tl.reshape(x, (MP, 2, 2, 2, 4, 2, 2)), (6, 1, 4, 2, 3, 5, 0)), (128, MP))


@triton.jit
def _half_step(xs, ql, ql1, qh, qh1, sc, sc1, dw, sh, acc, BN: tl.constexpr, X_F16: tl.constexpr,
               ASM: tl.constexpr):
    """``acc [BN, MP] += dot(w, x)`` over one step from :func:`_step_loads`' words, ``xs [128, MP]`` x of its values
    in the tile's column order."""
    dt: tl.constexpr = tl.float16 if X_F16 else tl.bfloat16
    MAGIC: tl.constexpr = 0x64006400 if X_F16 else 0x43004300
    ql = _funnel(ql, ql1, sh, ASM)
    qh = _funnel(qh, qh1, sh, ASM)
    sc = _funnel(sc, sc1, sh, ASM)
    d = ((dw >> tl.reshape(sh, (BN,))) & 0xFFFF).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    scb = (sc[:, :, None] << (24 - 8 * tl.arange(0, 4))[None, None, :]) >> 24  # int8 scales [BN, 2, 4]
    S2 = _pair16(tl.reshape(d[:, None, None] * scb.to(tl.float32), (BN, 8)).to(dt))
    # scale 4 i0 + 2 c0 + f // 4 of ql word 8 c0 + f, shift i = 2 i1 + i0
    S2 = tl.permute(tl.reshape(S2, (BN, 2, 2, 2)), (0, 2, 3, 1))  # [BN, c0, f // 4, i0]
    S2 = tl.reshape(tl.broadcast_to(tl.reshape(S2, (BN, 2, 2, 1, 1, 2)), (BN, 2, 2, 4, 2, 2)), (BN, 16, 4))
    # qh word f of ql word 8 c0 + f, shifted by 2 c0: its pairs at bits 4 i, 4 i + 16
    hs = tl.reshape(tl.broadcast_to(tl.reshape(qh, (BN, 1, 8)), (BN, 2, 8)), (BN, 16))
    hs = hs >> (2 * (tl.arange(0, 16) // 8))[None, :]
    i = tl.arange(0, 4)[None, None, :]
    # bits 4 i, 4 i + 1 (and + 16) of hs to bits 4, 5: left 4 for i = 0, right 4 i - 4 else
    high = ((hs[:, :, None] << tl.where(i == 0, 4, 0)) >> tl.maximum(4 * i - 4, 0)) & 0x00300030
    code = ((ql[:, :, None] >> 4 * i) & 0x000F000F) | high | MAGIC
    return tl.dot(_tile(_q6_pairs(code, S2, X_F16, ASM), BN, 128), xs, acc)


@triton.jit(do_not_specialize=["steps_per_split"])
def q6k_mmv_kernel(
    x_ptr,  # [M, K] activations, bf16 or fp16, 4-byte aligned rows (unit column stride, even stride_xm)
    w_ptr,  # [N * K / 256 * 210] uint8 Q6_K blocks, 4-byte aligned
    out_ptr,  # [M, N] output (written unless SPLIT_K without FUSE)
    part_ptr,  # [split, M, N] fp32 partials (SPLIT_K)
    cnt_ptr,  # [cdiv(N, BN)] int32 arrival counters, zero between launches (FUSE)
    M, N, K, stride_xm, row_bytes, steps_per_split,
    BN: tl.constexpr, MP: tl.constexpr, X_F16: tl.constexpr, SPLIT_K: tl.constexpr, FUSE: tl.constexpr,
    PREFETCH: tl.constexpr = True, ASM: tl.constexpr = True, PDL: tl.constexpr = 0,
):
    """Grid ``(cdiv(N, BN), split)``."""
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rows = pid_n * BN + tl.arange(0, BN)
    row_ok = rows < N
    rows = tl.where(row_ok, rows, 0)
    row_byte = rows * row_bytes
    m = tl.arange(0, MP)
    u_lo = pid_k * steps_per_split
    u_hi = tl.minimum(K // 128, u_lo + steps_per_split)
    wp = w_ptr.to(tl.pointer_type(tl.int32))
    dt = x_ptr.dtype.element_ty
    acc = tl.zeros([BN, MP], dtype=tl.float32)
    xn = _x_load(x_ptr, m, u_lo, stride_xm, tl.where(u_lo < u_hi, M, 0), 128, 128)  # x of the next step
    if PREFETCH:
        ql, ql1, qh, qh1, sc, sc1, dw, sh = _step_loads(wp, row_byte, u_lo)
    for u in range(u_lo, u_hi):
        xs = _x_order_half(pinned(xn, ASM), dt)
        xn = _x_load(x_ptr, m, u + 1, stride_xm, tl.where(u + 1 < u_hi, M, 0), 128, 128)
        if PREFETCH:
            a0, a1, a2, a3, a4, a5, a6 = (pinned(ql, ASM), pinned(ql1, ASM), pinned(qh, ASM), pinned(qh1, ASM),
                                          pinned(sc, ASM), pinned(sc1, ASM), pinned(dw, ASM))
            a7 = sh
            ql, ql1, qh, qh1, sc, sc1, dw, sh = _step_loads(wp, row_byte, tl.minimum(u + 1, u_hi - 1))
        else:
            a0, a1, a2, a3, a4, a5, a6, a7 = _step_loads(wp, row_byte, u)
        acc = _half_step(xs, a0, a1, a2, a3, a4, a5, a6, a7, acc, BN, X_F16, ASM)
    mask = row_ok[:, None] & (m < M)[None, :]
    out_off = m[None, :].to(tl.int64) * N + (pid_n * BN + tl.arange(0, BN))[:, None]
    store_result(out_ptr, part_ptr, part_ptr, cnt_ptr + pid_n, acc, acc, out_off, mask, M * N, SPLIT_K, FUSE, False, 0)


def supports(ggml_type: int, x_dtype: torch.dtype, m: int, k: int, raw_bytes: int) -> bool:
    """``ROWS_MIN`` to ``ROWS_MAX`` rows of bf16/fp16 x (its dtype the result's: the double rounding of each weight is
    within a 16-bit result's error bar, not fp32's) against Q6_K rows of whole super-blocks, int32 offsets.
    ``MLX_NATIVE_MMV=off`` turns it off, as the 4-bit tensor-core decode kernel."""
    return (env.settings.mmv != "off" and ggml_type == Q6K_ID and ROWS_MIN <= m <= ROWS_MAX
            and x_dtype in (torch.bfloat16, torch.float16) and k > 0 and k % 256 == 0 and raw_bytes < 2**31)


class Q6kMmvLaunch:
    """:func:`q6k_mmv_kernel` for ``(x [m, k], raw)`` (raw: the blocks as uint8, 16-byte aligned), x rows at stride
    ``x_row_stride`` (an odd one is copied to contiguous rows: x is read as int32 words); the result has x's dtype.
    The counters of a K split belong to the plan: it must not run on two streams at once."""

    def __init__(self, m: int, n: int, k: int, x_dtype: torch.dtype, x_row_stride: int, device,
                 programs_per_sm: int = PROGRAMS_PER_SM):
        if k % 256 or not 1 <= m <= ROWS_MAX:
            raise ValueError(f"q6k_mmv: rows of {k} values (whole 256-value super-blocks), 1-{ROWS_MAX} rows of x "
                             f"(got {m})")
        tiles = triton.cdiv(n, BN)
        self.split, per_split = split_rule(k // STEP_VALUES, 1, tiles,
                                           programs_per_sm * device_info(device).sm_count, MIN_STEPS)
        self.m, self.n, self.dtype, self.device = m, n, x_dtype, device
        self.x_copy = x_row_stride % 2 == 1
        self.ints = (m, n, k, k if self.x_copy else x_row_stride, k // 256 * 210, per_split)
        self.splitk = SplitK(self.split, m, n, False, 0, device, tiles=tiles) if self.split > 1 else None
        self.launch = dependent_launch(q6k_mmv_kernel, (tiles, self.split), dict(
            BN=BN, MP=8 if m <= 8 else 16, X_F16=x_dtype == torch.float16, SPLIT_K=self.split > 1,
            FUSE=self.splitk is not None and self.splitk.fused, PREFETCH=prefetch_rule(m, self.split),
            ASM=not env.settings.triton_interpret), device, False, num_warps=WARPS, num_stages=STAGES)

    def __call__(self, x: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
        out = empty((self.m, self.n), dtype=self.dtype, device=self.device)
        x = x.contiguous() if self.x_copy else word_aligned(x)
        return run_split(self.launch, self.splitk, (x, raw), out, self.ints)
