"""Pure-PyTorch reference of the MoE ops: routing, expert matmuls, weighted reduce.

Expert matmuls take ``R`` gathered rows: row ``r`` multiplies ``x_rows[r]`` by
expert ``ids[r]``'s weight. Weights are dequantized per gathered row in chunks
of bounded size (no data-dependent Python, so this also runs on CUDA tensors).
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from ..ggml import ref as ggml_ref
from ..ggml.formats import GGMLType
from ..quant import ref as quant_ref

_CHUNK_BYTES = 256 << 20
ACTIVATIONS = ("silu", "gelu_tanh")


def route(logits: torch.Tensor, top_k: int, scoring: str, renormalize: bool,
          bias: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k experts per row (ties: the lower id first) and their weights (float32)."""
    compute = torch.float64 if logits.dtype == torch.float64 else torch.float32
    z = logits.to(compute)
    probs = torch.softmax(z, dim=-1) if scoring == "softmax" else torch.sigmoid(z)
    sel = probs + bias.to(compute) if bias is not None else probs
    order = torch.sort(sel, dim=-1, descending=True, stable=True).indices[..., :top_k]
    w = torch.gather(probs, -1, order)
    if renormalize:
        w = w / w.sum(-1, keepdim=True)
    return order.to(torch.int32), w.to(torch.float32)


def router_logits(x: torch.Tensor, router: torch.Tensor) -> torch.Tensor:
    """``x @ router.T`` in fp32 (fp64 for fp64 x): the logits ``moe_router`` routes, ``[..., E]``."""
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    return torch.matmul(x.to(compute), router.to(compute).T)


def activate(gate: torch.Tensor, up: torch.Tensor, activation: str) -> torch.Tensor:
    if activation == "silu":
        return F.silu(gate) * up
    return F.gelu(gate, approximate="tanh") * up


def _chunks(rows: int, n: int, k: int):
    per = max(1, _CHUNK_BYTES // max(1, 8 * n * k))
    return [slice(s, s + per) for s in range(0, rows, per)]


def affine_rows(x_rows: torch.Tensor, ids: torch.Tensor, w: torch.Tensor, scales: torch.Tensor,
                biases: torch.Tensor, group_size: int, bits: int, compute: torch.dtype) -> torch.Tensor:
    """``[R, K] x experts -> [R, N]`` in ``compute`` precision (not rounded)."""
    n, k = w.shape[-2], x_rows.shape[-1]
    w = w.view(torch.int32) if w.dtype == torch.uint32 else w  # CUDA cannot index uint32
    out = []
    for sl in _chunks(x_rows.shape[0], n, k):
        e = ids[sl].long()
        wd = quant_ref.dequantize(w[e], scales[e], biases[e], group_size, bits, dtype=compute, compute=compute)
        out.append(torch.bmm(wd, x_rows[sl].to(compute).unsqueeze(-1)).squeeze(-1))
    return torch.cat(out, 0) if out else x_rows.new_empty((0, n), dtype=compute)


def ggml_rows(x_rows: torch.Tensor, ids: torch.Tensor, raw: torch.Tensor, t: GGMLType, n: int,
              compute: torch.dtype) -> torch.Tensor:
    """As :func:`affine_rows` for GGUF experts stacked in ``raw`` (``[E, n, k]`` blocks)."""
    k = x_rows.shape[-1]
    per_expert = raw.reshape(-1).reshape(-1, n * k // t.block_elems * t.block_bytes)
    out = []
    for sl in _chunks(x_rows.shape[0], n, k):
        e = ids[sl].long()
        wd = ggml_ref.dequantize(per_expert[e], t, (e.numel(), n, k), compute)
        out.append(torch.bmm(wd, x_rows[sl].to(compute).unsqueeze(-1)).squeeze(-1))
    return torch.cat(out, 0) if out else x_rows.new_empty((0, n), dtype=compute)


def weighted_reduce(y: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``sum_j weights[..., j] * y[..., j, :]`` in fp32 (fp64 for fp64), y's dtype out."""
    compute = torch.float64 if y.dtype == torch.float64 else torch.float32
    return (y.to(compute) * weights.to(compute).unsqueeze(-1)).sum(-2).to(y.dtype)
