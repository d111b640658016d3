"""Pure-PyTorch reference of MLX affine quantization.

The format (MLX ``mx.quantize(w, group_size, bits)``, mode "affine"):

* ``w [..., K]`` is cut into groups of ``group_size`` consecutive elements of
  the last dim; each group has a ``scale`` and a ``bias`` (stored in w's
  dtype) and ``w ~= q * scale + bias`` with integer ``q`` in ``[0, 2**bits)``.
* The ``q`` of a row form one little-endian bit stream: element ``k`` takes
  bits ``[k * bits, (k + 1) * bits)`` of the stream, and the stream is stored
  as uint32 words (``[..., K * bits / 32]``). For bits in {2, 4, 8} element
  ``k`` sits in word ``k // (32 / bits)`` at shift ``(k % (32 / bits)) * bits``;
  for 3, 5 and 6 bits an element may straddle two words.
* Scale and bias are chosen as MLX does (so that ``quantize`` is bit-identical
  to ``mx.quantize``): fp32 math, the edge of larger magnitude (min or max) is
  represented exactly, and the scale may be negative.

All functions run on any device with torch ops only (no host sync).
"""

from __future__ import annotations

import torch

SUPPORTED_BITS = (2, 3, 4, 5, 6, 8)
SUPPORTED_GROUP_SIZES = (32, 64, 128)


def _to_u32_int64(w_q: torch.Tensor) -> torch.Tensor:
    """Packed words (uint32 or int32 storage) as int64 values in [0, 2**32)."""
    if w_q.dtype != torch.int32:
        w_q = w_q.view(torch.int32)
    return w_q.to(torch.int64) & 0xFFFFFFFF


def unpack(w_q: torch.Tensor, bits: int) -> torch.Tensor:
    """``[..., K * bits / 32]`` packed words -> ``[..., K]`` int64 codes in ``[0, 2**bits)``."""
    words = _to_u32_int64(w_q)
    n_words = words.shape[-1]
    k = n_words * 32 // bits
    mask = (1 << bits) - 1
    if 32 % bits == 0:
        shifts = torch.arange(0, 32, bits, device=words.device, dtype=torch.int64)
        return ((words.unsqueeze(-1) >> shifts) & mask).reshape(*words.shape[:-1], k)
    pos = torch.arange(k, device=words.device, dtype=torch.int64) * bits
    idx, off = pos // 32, pos % 32
    lo = words.index_select(-1, idx) >> off
    nxt = torch.clamp(idx + 1, max=n_words - 1)
    hi = (words.index_select(-1, nxt) << (32 - off)) & 0xFFFFFFFF
    straddles = off + bits > 32
    return (lo | torch.where(straddles, hi, torch.zeros_like(hi))) & mask


def pack(q: torch.Tensor, bits: int) -> torch.Tensor:
    """``[..., K]`` integer codes in ``[0, 2**bits)`` -> ``[..., K * bits / 32]`` uint32 words."""
    q = q.to(torch.int64)
    k = q.shape[-1]
    n_words = k * bits // 32
    pos = torch.arange(k, device=q.device, dtype=torch.int64) * bits
    idx, off = pos // 32, pos % 32
    lo = (q << off) & 0xFFFFFFFF
    words = torch.zeros(*q.shape[:-1], n_words + 1, dtype=torch.int64, device=q.device)
    words.index_add_(-1, idx, lo)  # bit fields do not overlap: add == or
    straddles = off + bits > 32
    hi = torch.where(straddles, q >> (32 - off), torch.zeros_like(q))
    words.index_add_(-1, idx + 1, hi)
    words = words[..., :n_words]
    words = torch.where(words >= 2**31, words - 2**32, words)
    return words.to(torch.int32).view(torch.uint32)


def quantize(w: torch.Tensor, group_size: int, bits: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """MLX affine quantization of ``w [..., K]``: ``(w_q uint32 [..., K*bits/32], scales, biases [..., K/gs])``.

    Bit-identical to ``mx.quantize``: the same fp32 operations in the same order.
    """
    shape = w.shape
    n_groups = shape[-1] // group_size
    wf = w.to(torch.float32).reshape(*shape[:-1], n_groups, group_size)
    n_bins = torch.full((), float((1 << bits) - 1), dtype=torch.float32, device=w.device)
    eps = torch.full((), 1e-7, dtype=torch.float32, device=w.device)  # no host copy: graph-capturable
    w_max = wf.amax(-1, keepdim=True)
    w_min = wf.amin(-1, keepdim=True)
    use_min = w_min.abs() > w_max.abs()
    scale = torch.maximum((w_max - w_min) / n_bins, eps)
    scale = torch.where(use_min, scale, -scale)
    edge = torch.where(use_min, w_min, w_max)
    q0 = torch.round(edge / scale)  # round half to even, as std::rint
    nonzero = q0 != 0
    scale = torch.where(nonzero, edge / q0, scale)
    bias = torch.where(nonzero, edge, torch.zeros_like(edge))
    q = torch.clamp(torch.round((wf - bias) / scale), min=0.0)
    q = torch.minimum(q, n_bins)
    w_q = pack(q.reshape(*shape[:-1], shape[-1]).to(torch.int64), bits)
    return w_q, scale.squeeze(-1).to(w.dtype), bias.squeeze(-1).to(w.dtype)


def dequantize(w_q: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor, group_size: int, bits: int,
               dtype: torch.dtype | None = None, compute: torch.dtype = torch.float32) -> torch.Tensor:
    """``q * scale + bias`` in ``compute`` precision, one rounding to ``dtype`` (default: scales' dtype)."""
    q = unpack(w_q, bits).to(compute)
    k = q.shape[-1]
    q = q.reshape(*q.shape[:-1], k // group_size, group_size)
    w = q * scales.to(compute).unsqueeze(-1) + biases.to(compute).unsqueeze(-1)
    return w.reshape(*w.shape[:-2], k).to(dtype or scales.dtype)


def quantized_matmul(x: torch.Tensor, w_q: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor,
                     transpose: bool, group_size: int, bits: int, out_dtype: torch.dtype) -> torch.Tensor:
    """``x @ dequantize(w).T`` (transpose) or ``x @ dequantize(w)``, fp32 math (fp64 for fp64 x)."""
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    w = dequantize(w_q, scales, biases, group_size, bits, dtype=compute, compute=compute)
    if transpose:
        w = w.transpose(-1, -2)
    return torch.matmul(x.to(compute), w).to(out_dtype)


# Dequantized bytes per chunk of gathered rows in gather_qmm's reference.
_CHUNK_BYTES = 256 << 20


def gather_qmm(x: torch.Tensor, w_q: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor,
               lhs: torch.Tensor, rhs: torch.Tensor, transpose: bool, group_size: int, bits: int,
               out_dtype: torch.dtype) -> torch.Tensor:
    """MLX ``gather_qmm`` with broadcast index arrays ``lhs``/``rhs`` of one shape ``B``.

    ``x [..., M, K]`` and ``w_q [..., rows, cols]`` are flattened over their batch
    dims; ``out[b] = x[lhs[b]] @ W[rhs[b]](.T)``, shape ``B + [M, N]``. Weights are
    dequantized per gathered matrix, in chunks (no data-dependent Python).
    """
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    m, k = x.shape[-2:]
    xs = x.reshape(-1, m, k)
    wq = w_q.reshape(-1, *w_q.shape[-2:])
    wq = wq.view(torch.int32) if wq.dtype == torch.uint32 else wq  # CUDA cannot index uint32
    sc = scales.reshape(-1, *scales.shape[-2:])
    bi = biases.reshape(-1, *biases.shape[-2:])
    batch = lhs.shape
    li, ri = lhs.reshape(-1).long(), rhs.reshape(-1).long()
    n = wq.shape[-2] if transpose else wq.shape[-1] * 32 // bits
    per = max(1, _CHUNK_BYTES // max(1, 4 * n * k))
    outs = []
    for start in range(0, li.numel(), per):
        sl = slice(start, start + per)
        w = dequantize(wq[ri[sl]], sc[ri[sl]], bi[ri[sl]], group_size, bits, dtype=compute, compute=compute)
        if transpose:
            w = w.transpose(-1, -2)
        outs.append(torch.matmul(xs[li[sl]].to(compute), w))
    out = torch.cat(outs, 0) if outs else torch.empty(0, m, n, dtype=compute, device=x.device)
    return out.reshape(*batch, m, n).to(out_dtype)
