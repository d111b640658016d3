"""MLX affine quantization: ``quantize``, ``dequantize``, ``quantized_matmul``, ``gather_qmm``.

Names, arguments and packing follow MLX (``mx.quantize`` & co., mode
"affine"); see :mod:`.ref` for the format. CUDA tensors run the Triton kernels
of :mod:`.kernel` (a mat-vec kernel for a few rows, a tiled tensor-core kernel
for many); CPU tensors run the PyTorch reference.

No ``from __future__ import annotations`` here: torch.library reads the annotations.
"""

import math
from typing import Optional

import torch

from ...errors import InvalidArgumentError, UnsupportedError
from ...runtime import checks
from ...runtime.dispatch import use_triton
from ...runtime.library import register_op
from ...runtime.memory import empty
from ...runtime.plans import PlanCache, tensor_key
from . import ref
from .ref import SUPPORTED_BITS, SUPPORTED_GROUP_SIZES

PACKED_DTYPES = (torch.uint32, torch.int32)
INDEX_DTYPES = (torch.int32, torch.int64, torch.uint32, torch.int16, torch.uint8)


def check_format(op: str, group_size: int, bits: int) -> None:
    """``bits`` and ``group_size`` are ones MLX supports (UnsupportedError lists them)."""
    if isinstance(bits, bool) or bits not in SUPPORTED_BITS:
        raise UnsupportedError(f"{op}: bits={bits!r} is not supported; supported: {', '.join(map(str, SUPPORTED_BITS))}")
    if isinstance(group_size, bool) or group_size not in SUPPORTED_GROUP_SIZES:
        raise UnsupportedError(
            f"{op}: group_size={group_size!r} is not supported; supported: "
            f"{', '.join(map(str, SUPPORTED_GROUP_SIZES))}")


def check_packed(op: str, w: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor, group_size: int,
                 bits: int) -> int:
    """Packed ``w [..., cols]`` with matching ``scales``/``biases [..., groups]``; returns the unpacked width."""
    checks.check_tensor(op, "w", w, PACKED_DTYPES, min_ndim=1)
    checks.check_tensor(op, "scales", scales)
    checks.check_tensor(op, "biases", biases)
    checks.check_same_device(op, "w", w, scales=scales, biases=biases)
    if scales.shape != biases.shape:
        raise InvalidArgumentError(
            f"{op}: biases has shape {tuple(biases.shape)} but scales has shape {tuple(scales.shape)}")
    if scales.dim() != w.dim() or scales.shape[:-1] != w.shape[:-1]:
        raise InvalidArgumentError(
            f"{op}: scales has shape {tuple(scales.shape)}, which does not match w's shape {tuple(w.shape)} "
            f"(all dims but the last must agree)")
    width = w.shape[-1] * 32 // bits
    if (w.shape[-1] * 32) % bits or width != scales.shape[-1] * group_size:
        raise InvalidArgumentError(
            f"{op}: packed w has {w.shape[-1]} uint32 words per row ({w.shape[-1] * 32 / bits:g} values at "
            f"bits={bits}) but scales has {scales.shape[-1]} groups of {group_size} "
            f"({scales.shape[-1] * group_size} values)")
    return width


def out_dtype(x: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor) -> torch.dtype:
    """MLX's result type: x's dtype promoted with the scales' and biases' dtypes."""
    return torch.promote_types(torch.promote_types(x.dtype, scales.dtype), biases.dtype)


# --------------------------------------------------------------------------- quantize

def _validate_quantize(w, group_size, bits):
    op = "quantize"
    check_format(op, group_size, bits)
    checks.check_tensor(op, "w", w, min_ndim=2)
    if w.shape[-1] % group_size:
        raise InvalidArgumentError(
            f"{op}: the last dim of w ({w.shape[-1]}) is not a multiple of group_size={group_size}")


def _fake_quantize(w, group_size, bits):
    _validate_quantize(w, group_size, bits)
    k = w.shape[-1]
    return (w.new_empty((*w.shape[:-1], k * bits // 32), dtype=torch.uint32),
            w.new_empty((*w.shape[:-1], k // group_size)), w.new_empty((*w.shape[:-1], k // group_size)))


@register_op("quantize", fake=_fake_quantize)
def _quantize(w: torch.Tensor, group_size: int, bits: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    _validate_quantize(w, group_size, bits)
    return ref.quantize(w, group_size, bits)


def quantize(w: torch.Tensor, group_size: int = 64, bits: int = 4) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Affine-quantize ``w`` along its last dim, exactly as ``mx.quantize`` does.

    Not a hot op (weights are quantized once): it runs as torch ops on any
    device, with MLX's fp32 arithmetic, so the result is bit-identical to MLX's.

    Args:
        w: ``[..., K]`` float32/float16/bfloat16, at least 2 dims, ``K % group_size == 0``.
        group_size: 32, 64 or 128.
        bits: 2, 3, 4, 5, 6 or 8.

    Returns:
        ``(w_q, scales, biases)``: ``w_q [..., K * bits / 32]`` uint32 (the little-endian
        bit stream of the codes), ``scales``/``biases [..., K / group_size]`` in w's dtype.

    Raises:
        UnsupportedError (bits, group_size), InvalidArgumentError, UnsupportedDTypeError.

    Example:
        >>> w_q, scales, biases = mn.quantize(w, group_size=64, bits=4)
    """
    return _quantize(w, int(group_size), int(bits))


# --------------------------------------------------------------------------- dequantize

def _validate_dequantize(w, scales, biases, group_size, bits):
    check_format("dequantize", group_size, bits)
    return check_packed("dequantize", w, scales, biases, group_size, bits)


def _dequantize_plan(w, scales, biases, group_size, bits):
    width = _validate_dequantize(w, scales, biases, group_size, bits)
    from .kernel import DequantPlan

    return DequantPlan(w, scales, biases, group_size, bits, width)


_DEQ_PLANS = PlanCache(_dequantize_plan)


def _fake_dequantize(w, scales, biases, group_size, bits):
    width = _validate_dequantize(w, scales, biases, group_size, bits)
    return scales.new_empty((*w.shape[:-1], width))


@register_op("dequantize", fake=_fake_dequantize)
def _dequantize(w: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor, group_size: int,
                bits: int) -> torch.Tensor:
    plan = _DEQ_PLANS.get((tensor_key(w), tensor_key(scales), tensor_key(biases), group_size, bits), w, scales,
                          biases, group_size, bits)
    if plan.numel == 0:
        return empty(plan.out_shape, dtype=scales.dtype, device=w.device)
    if use_triton("dequantize", w):
        return plan(w, scales, biases)
    return ref.dequantize(w, scales, biases, group_size, bits)


def dequantize(w: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor, group_size: int = 64,
               bits: int = 4) -> torch.Tensor:
    """Inverse of :func:`quantize`: ``q * scale + bias`` (MLX ``mx.dequantize``).

    Args:
        w: ``[..., K * bits / 32]`` uint32 (int32 storage is accepted too).
        scales, biases: ``[..., K / group_size]``, same dtype (float32/float16/bfloat16).
        group_size, bits: as given to :func:`quantize`.

    Returns:
        ``[..., K]`` in the scales' dtype (fp32 math, one rounding).

    Raises:
        UnsupportedError, InvalidArgumentError (sizes that do not match), UnsupportedDTypeError.
    """
    return _dequantize(w, scales, biases, int(group_size), int(bits))


# --------------------------------------------------------------------------- quantized_embedding

def _validate_embedding(ids, w, scales, biases, group_size, bits, dtype):
    op = "quantized_embedding"
    check_format(op, group_size, bits)
    width = check_packed(op, w, scales, biases, group_size, bits)
    if w.dim() != 2:
        raise InvalidArgumentError(f"{op}: w must be a 2-D [vocab, K * bits / 32] table, got shape {tuple(w.shape)}")
    checks.check_tensor(op, "ids", ids, (torch.int32, torch.int64), min_ndim=0)
    checks.check_same_device(op, "w", w, ids=ids)
    if dtype not in checks.FLOAT_DTYPES:
        raise checks.UnsupportedDTypeError(
            f"{op}: dtype {checks.dtype_name(dtype)} is not supported; supported: float32, float16, bfloat16")
    return width


def _embedding_plan(ids, w, scales, biases, group_size, bits, dtype):
    width = _validate_embedding(ids, w, scales, biases, group_size, bits, dtype)
    from .kernel import EmbeddingPlan

    return EmbeddingPlan(ids, w, scales, group_size, bits, width, dtype)


_EMB_PLANS = PlanCache(_embedding_plan)


def _fake_embedding(ids, w, scales, biases, group_size, bits, dtype):
    width = _validate_embedding(ids, w, scales, biases, group_size, bits, dtype)
    return scales.new_empty((*ids.shape, width), dtype=dtype)


@register_op("quantized_embedding", fake=_fake_embedding)
def _quantized_embedding(ids: torch.Tensor, w: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor,
                         group_size: int, bits: int, dtype: torch.dtype) -> torch.Tensor:
    plan = _EMB_PLANS.get((tensor_key(ids), tensor_key(w), tensor_key(scales), tensor_key(biases), group_size, bits,
                           dtype), ids, w, scales, biases, group_size, bits, dtype)
    checks.check_index_range("quantized_embedding", "ids", ids, w.shape[0], "rows")
    if plan.numel == 0:
        return empty(plan.out_shape, dtype=dtype, device=w.device)
    if use_triton("quantized_embedding", w):
        return plan(ids, w, scales, biases)
    flat = ids.reshape(-1)
    words = w.view(torch.int32)[flat].view(w.dtype) if w.dtype == torch.uint32 else w[flat]  # no uint32 index_cuda
    rows = ref.dequantize(words, scales[flat], biases[flat], group_size, bits, dtype=dtype)
    return rows.reshape(plan.out_shape)


def quantized_embedding(ids: torch.Tensor, w: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor,
                        group_size: int = 64, bits: int = 4, *, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """Embedding lookup on an MLX-affine table (mlx-lm's ``QuantizedEmbedding``): dequantizes only the rows in
    ``ids``, gather and dequantize in one launch.

    Args:
        ids: int32/int64 token ids, any shape.
        w, scales, biases: the table from :func:`quantize`: ``w [vocab, K * bits / 32]``,
            ``scales``/``biases [vocab, K / group_size]``.
        group_size, bits: as given to :func:`quantize`.
        dtype: output dtype (default: the scales' dtype); fp32 math, one rounding.

    Returns:
        ``ids.shape + (K,)``. Ids out of range raise on CPU tensors; on CUDA (where checking would
        sync) their rows come out NaN.

    Raises:
        UnsupportedError, InvalidArgumentError, UnsupportedDTypeError.

    Example:
        >>> h = mn.quantized_embedding(tokens, w_q, scales, biases, 64, 4, dtype=torch.bfloat16)
    """
    return _quantized_embedding(ids, w, scales, biases, int(group_size), int(bits), dtype or scales.dtype)


# --------------------------------------------------------------------------- quantized_matmul

def _validate_qmm(op, x, w, scales, biases, transpose, group_size, bits):
    check_format(op, group_size, bits)
    checks.check_tensor(op, "x", x)
    width = check_packed(op, w, scales, biases, group_size, bits)
    checks.check_same_device(op, "x", x, w=w)
    if w.dim() != 2:
        raise UnsupportedError(f"{op}: w must be 2-D (use gather_qmm for stacked matrices), got shape {tuple(w.shape)}")
    k = w.shape[1] * 32 // bits if transpose else w.shape[0]
    n = w.shape[0] if transpose else width
    if x.shape[-1] != k:
        what = "w.shape[1] * 32 / bits" if transpose else "w.shape[0]"
        raise InvalidArgumentError(
            f"{op}: x has {x.shape[-1]} features in its last dim but w holds K={k} ({what}, "
            f"transpose={transpose}, bits={bits}); packed sizes do not match")
    return n, k


def _qmm_plan(x, w, scales, biases, transpose, group_size, bits):
    n, k = _validate_qmm("quantized_matmul", x, w, scales, biases, transpose, group_size, bits)
    from .kernel import QmmPlan

    return QmmPlan(x, w, scales, biases, transpose, group_size, bits, n, k, out_dtype(x, scales, biases))


_QMM_PLANS = PlanCache(_qmm_plan)


def _fake_qmm(x, w, scales, biases, transpose, group_size, bits):
    n, _ = _validate_qmm("quantized_matmul", x, w, scales, biases, transpose, group_size, bits)
    return x.new_empty((*x.shape[:-1], n), dtype=out_dtype(x, scales, biases))


@register_op("quantized_matmul", fake=_fake_qmm)
def _quantized_matmul(x: torch.Tensor, w: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor,
                      transpose: bool, group_size: int, bits: int) -> torch.Tensor:
    plan = _QMM_PLANS.get((tensor_key(x), tensor_key(w), tensor_key(scales), tensor_key(biases), transpose,
                           group_size, bits), x, w, scales, biases, transpose, group_size, bits)
    if plan.empty:
        return empty(plan.out_shape, dtype=plan.out_dtype, device=x.device)
    if use_triton("quantized_matmul", x):
        return plan(x, w, scales, biases)
    return ref.quantized_matmul(x, w, scales, biases, transpose, group_size, bits, plan.out_dtype)


def quantized_matmul(x: torch.Tensor, w: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor,
                     transpose: bool = True, group_size: int = 64, bits: int = 4) -> torch.Tensor:
    """``x @ dequantize(w).T`` (``transpose=True``) or ``x @ dequantize(w)`` (MLX ``mx.quantized_matmul``).

    The weight is never dequantized in memory by the decode kernels (up to 16 rows
    of x; 4-bit weights with 16-bit x up to 128 rows): they dequantize in registers and
    split K over programs (one row of 4-bit weights: a streamed mat-vec near memory
    bandwidth, ``MLX_NATIVE_AFFINE_MV``). More rows dequantize L2-sized chunks for cuBLAS
    (``transpose=False``: tiles for tensor-core dots).

    Args:
        x: ``[..., K]`` float32/float16/bfloat16 (rows may be strided; last dim stride 1).
        w: ``transpose=True``: ``[N, K * bits / 32]`` uint32 as :func:`quantize` packs an
            ``[N, K]`` weight (a Linear layer's ``weight``); ``transpose=False``:
            ``[K, N * bits / 32]``.
        scales, biases: ``[N, K / group_size]`` (or ``[K, N / group_size]``).
        transpose, group_size, bits: as in MLX.

    Returns:
        ``[..., N]``; dtype is x's promoted with the scales' (MLX's rule: bf16 x with bf16
        scales gives bf16).

    Raises:
        UnsupportedError (bits, group_size, w not 2-D), InvalidArgumentError (x's K does not
        match the packed w, scales do not match w), UnsupportedDTypeError, DeviceMismatchError.

    Example:
        >>> w_q, s, b = mn.quantize(linear.weight, 64, 4)
        >>> y = mn.quantized_matmul(x, w_q, s, b, transpose=True, group_size=64, bits=4)
    """
    return _quantized_matmul(x, w, scales, biases, bool(transpose), int(group_size), int(bits))


# --------------------------------------------------------------------------- gather_qmm

def _gather_indices(op, x, w, lhs, rhs):
    """Validated index arrays, defaults filled in and broadcast together (shape B)."""
    for name, t in (("lhs_indices", lhs), ("rhs_indices", rhs)):
        if t is not None:
            checks.check_tensor(op, name, t, INDEX_DTYPES, min_ndim=0)
            checks.check_same_device(op, "x", x, **{name: t})
    lhs = lhs if lhs is not None else _default_indices(x, x.device)
    rhs = rhs if rhs is not None else _default_indices(w, x.device)
    try:
        shape = torch.broadcast_shapes(lhs.shape, rhs.shape)
    except RuntimeError:
        raise InvalidArgumentError(
            f"{op}: lhs_indices {tuple(lhs.shape)} and rhs_indices {tuple(rhs.shape)} do not broadcast") from None
    return lhs.expand(shape), rhs.expand(shape)


def _validate_gather(x, w, scales, biases, lhs, rhs, transpose, group_size, bits):
    op = "gather_qmm"
    check_format(op, group_size, bits)
    checks.check_tensor(op, "x", x, min_ndim=2)
    width = check_packed(op, w, scales, biases, group_size, bits)
    checks.check_same_device(op, "x", x, w=w)
    if w.dim() < 2:
        raise InvalidArgumentError(f"{op}: w must have at least 2 dims, got shape {tuple(w.shape)}")
    k = w.shape[-1] * 32 // bits if transpose else w.shape[-2]
    n = w.shape[-2] if transpose else width
    if x.shape[-1] != k:
        raise InvalidArgumentError(
            f"{op}: x has {x.shape[-1]} features in its last dim but w holds K={k} (transpose={transpose}, "
            f"bits={bits}); packed sizes do not match")
    lhs, rhs = _gather_indices(op, x, w, lhs, rhs)
    return n, k, lhs.shape


def _gather_plan(x, w, scales, biases, lhs, rhs, transpose, group_size, bits):
    n, k, batch = _validate_gather(x, w, scales, biases, lhs, rhs, transpose, group_size, bits)
    from .kernel import GatherQmmPlan

    return GatherQmmPlan(x, w, scales, biases, batch, transpose, group_size, bits, n, k, out_dtype(x, scales, biases))


_GATHER_PLANS = PlanCache(_gather_plan)


def _fake_gather(x, w, scales, biases, lhs, rhs, transpose, group_size, bits):
    n, _, batch = _validate_gather(x, w, scales, biases, lhs, rhs, transpose, group_size, bits)
    return x.new_empty((*batch, x.shape[-2], n), dtype=out_dtype(x, scales, biases))


@register_op("gather_qmm", fake=_fake_gather)
def _gather_qmm(x: torch.Tensor, w: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor,
                lhs: Optional[torch.Tensor], rhs: Optional[torch.Tensor], transpose: bool, group_size: int,
                bits: int) -> torch.Tensor:
    key = (tensor_key(x), tensor_key(w), tensor_key(scales), tensor_key(biases), tensor_key(lhs), tensor_key(rhs),
           transpose, group_size, bits)
    plan = _GATHER_PLANS.get(key, x, w, scales, biases, lhs, rhs, transpose, group_size, bits)
    lhs, rhs = _gather_indices("gather_qmm", x, w, lhs, rhs)
    checks.check_index_range("gather_qmm", "lhs_indices", lhs, math.prod(x.shape[:-2]), "matrices")
    checks.check_index_range("gather_qmm", "rhs_indices", rhs, math.prod(w.shape[:-2]), "matrices")
    if plan.empty:
        return empty(plan.out_shape, dtype=plan.out_dtype, device=x.device)
    if use_triton("gather_qmm", x):
        return plan(x, w, scales, biases, lhs, rhs)
    return ref.gather_qmm(x, w, scales, biases, lhs, rhs, transpose, group_size, bits, plan.out_dtype)


def _default_indices(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    batch = t.shape[:-2]
    return torch.arange(math.prod(batch), device=device, dtype=torch.int32).reshape(batch)


def gather_qmm(x: torch.Tensor, w: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor,
               lhs_indices: Optional[torch.Tensor] = None, rhs_indices: Optional[torch.Tensor] = None,
               transpose: bool = True, group_size: int = 64, bits: int = 4,
               sorted_indices: bool = False) -> torch.Tensor:
    """Quantized matmul with gathered batches (MLX ``mx.gather_qmm``): the MoE expert matmul.

    With the batch dims of ``x`` (all but the last two) flattened to ``Bx`` and those
    of ``w`` to ``Bw``: ``out[i] = x[lhs_indices[i]] @ W[rhs_indices[i]](.T)``, where the
    index arrays broadcast to one shape ``B``; a missing index array defaults to
    ``arange`` over its operand's batch dims (reshaped to them). mlx-lm's SwitchGLU
    calls it with ``x [T, 1, 1, K]`` and ``rhs_indices [T, top_k]``.

    Args:
        x: ``[..., M, K]`` float32/float16/bfloat16.
        w: ``[..., N, K * bits / 32]`` uint32 (stacked expert weights; ``[..., K, N * bits / 32]``
            with ``transpose=False``).
        scales, biases: ``[..., N, K / group_size]``.
        lhs_indices, rhs_indices: integer tensors (or None), broadcastable together.
        transpose, group_size, bits: as in :func:`quantized_matmul`.
        sorted_indices: accepted for MLX compatibility; ours needs no hint.

    Returns:
        ``B + [M, N]`` in x's dtype promoted with the scales'.

    Raises:
        as :func:`quantized_matmul`; InvalidArgumentError for indices out of range when
        they are CPU tensors (see :func:`runtime.checks.check_index_range`).

    Example:
        >>> y = mn.gather_qmm(x[:, None, None, :], w_q, s, b, rhs_indices=expert_ids)  # [T, k, 1, N]
    """
    op = "gather_qmm"
    for name, t in (("x", x), ("w", w)):
        if not isinstance(t, torch.Tensor) or t.dim() < 2:
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise InvalidArgumentError(f"{op}: {name} must be a tensor with at least 2 dims, got {shape}")
    for name, t in (("lhs_indices", lhs_indices), ("rhs_indices", rhs_indices)):
        if t is not None and not isinstance(t, torch.Tensor):
            raise InvalidArgumentError(f"{op}: {name} must be a torch.Tensor or None, got {type(t).__name__}")
    return _gather_qmm(x, w, scales, biases, lhs_indices, rhs_indices, bool(transpose), int(group_size), int(bits))
