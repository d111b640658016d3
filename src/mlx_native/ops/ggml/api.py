"""GGUF block formats: ``ggml_dequantize``, ``ggml_matmul``, ``ggml_embedding``.

``raw`` is always the uint8 tensor of a GGUF tensor's bytes as laid out in the
file; ``shape`` its logical shape with the contiguous dim last (GGUF lists
dims the other way round: a weight with ``ne = [K, N]`` has ``shape=(N, K)``).
CUDA tensors run the Triton kernels of :mod:`.kernel` straight on the blocks;
CPU tensors run :mod:`.ref`.

No ``from __future__ import annotations`` here: torch.library reads the annotations.
"""

import math
from typing import Sequence, Union

import torch

from ...errors import FormatError, InvalidArgumentError
from ...runtime import checks
from ...runtime.dispatch import use_triton
from ...runtime.library import register_op
from ...runtime.memory import empty
from ...runtime.plans import PlanCache, tensor_key
from . import formats, ref
from .formats import GGMLType

RAW_DTYPES = (torch.uint8, torch.int8)
TypeArg = Union[int, str]


def check_raw(op: str, raw: torch.Tensor, t: GGMLType, shape: Sequence[int], name: str = "raw") -> None:
    """``raw`` is a contiguous byte tensor holding exactly the blocks of ``shape``."""
    checks.check_tensor(op, name, raw, RAW_DTYPES, min_ndim=0)
    if not raw.is_contiguous():
        raise InvalidArgumentError(f"{op}: {name} must be contiguous (the tensor's bytes as stored in the file)")
    nbytes = raw.numel()
    if nbytes % t.block_bytes:
        raise FormatError(
            f"{op}: {name} has {nbytes} bytes, not a whole number of {t.name} blocks of {t.block_bytes} bytes")
    need = math.prod(shape) // t.block_elems * t.block_bytes
    if nbytes != need:
        raise FormatError(
            f"{op}: {name} holds {nbytes // t.block_bytes} {t.name} blocks ({nbytes} bytes) but shape "
            f"{tuple(shape)} needs {need // t.block_bytes} ({need} bytes)")


def _check_out_dtype(op: str, dtype: torch.dtype) -> None:
    if dtype not in checks.FLOAT_DTYPES:
        raise checks.UnsupportedDTypeError(
            f"{op}: dtype {checks.dtype_name(dtype)} is not supported; supported: float32, float16, bfloat16")


# --------------------------------------------------------------------------- ggml_dequantize

def _validate_deq(raw, type_id, shape, dtype):
    op = "ggml_dequantize"
    t = formats.parse_type(op, type_id)
    dims = formats.parse_shape(op, shape, t)
    check_raw(op, raw, t, dims)
    _check_out_dtype(op, dtype)
    return t, dims


def _deq_plan(raw, type_id, shape, dtype):
    t, dims = _validate_deq(raw, type_id, shape, dtype)
    from .kernel import DequantPlan

    return DequantPlan(raw, t, dims, dtype)


_DEQ_PLANS = PlanCache(_deq_plan)


def _fake_deq(raw, type_id, shape, dtype):
    _, dims = _validate_deq(raw, type_id, shape, dtype)
    return raw.new_empty(dims, dtype=dtype)


@register_op("ggml_dequantize", fake=_fake_deq)
def _ggml_dequantize(raw: torch.Tensor, type_id: int, shape: list[int], dtype: torch.dtype) -> torch.Tensor:
    plan = _DEQ_PLANS.get((tensor_key(raw), type_id, tuple(shape), dtype), raw, type_id, shape, dtype)
    if plan.numel == 0:
        return empty(plan.shape, dtype=dtype, device=raw.device)
    if use_triton("ggml_dequantize", raw):
        return plan(raw)
    return ref.dequantize(raw, plan.t, plan.shape, dtype)


def ggml_dequantize(raw: torch.Tensor, ggml_type: TypeArg, shape: Sequence[int], *,
                    dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Dequantize the raw bytes of a GGUF tensor.

    Args:
        raw: uint8 (or int8) contiguous tensor of the tensor's bytes, any shape.
        ggml_type: an int, a ``gguf.GGMLQuantizationType`` or a name ("Q4_K"). Supported:
            F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
        shape: the logical shape, contiguous dim last (a multiple of the block size).
        dtype: output dtype (float32 default: bit-identical to ``gguf.quants.dequantize``).

    Returns:
        ``shape`` tensor of ``dtype`` on raw's device.

    Raises:
        UnsupportedError (type, named with the supported list), FormatError (byte count that is
        not a whole number of blocks or does not match ``shape``), InvalidArgumentError.

    Example:
        >>> w = mn.ggml_dequantize(raw, "Q4_K", (4096, 4096), dtype=torch.bfloat16)
    """
    return _ggml_dequantize(raw, _type_id("ggml_dequantize", ggml_type), _shape_list(shape), dtype)


def _type_id(op: str, ggml_type: TypeArg) -> int:
    return formats.parse_type(op, ggml_type).id


def _shape_list(shape) -> list[int]:
    try:
        return [int(s) for s in shape]
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"ggml: shape must be a sequence of ints, got {shape!r}") from None


# --------------------------------------------------------------------------- ggml_matmul

def _validate_mm(x, raw, type_id, shape, op: str = "ggml_matmul"):
    t = formats.parse_type(op, type_id)
    dims = formats.parse_shape(op, shape, t, min_ndim=2)
    if len(dims) != 2:
        raise InvalidArgumentError(f"{op}: shape must be (N, K), got {tuple(dims)}")
    checks.check_tensor(op, "x", x)
    checks.check_same_device(op, "x", x, raw=raw)
    check_raw(op, raw, t, dims)
    n, k = dims
    if x.shape[-1] != k:
        raise InvalidArgumentError(f"{op}: x has {x.shape[-1]} features in its last dim but shape {tuple(dims)} has K={k}")
    return t, n, k


def _mm_plan(x, raw, type_id, shape):
    t, n, k = _validate_mm(x, raw, type_id, shape)
    from .kernel import MatmulPlan

    return MatmulPlan(x, raw, t, n, k)


_MM_PLANS = PlanCache(_mm_plan)


def _fake_mm(x, raw, type_id, shape):
    _, n, _ = _validate_mm(x, raw, type_id, shape)
    return x.new_empty((*x.shape[:-1], n))


@register_op("ggml_matmul", fake=_fake_mm)
def _ggml_matmul(x: torch.Tensor, raw: torch.Tensor, type_id: int, shape: list[int]) -> torch.Tensor:
    plan = _MM_PLANS.get((tensor_key(x), tensor_key(raw), type_id, tuple(shape)), x, raw, type_id, shape)
    if plan.empty:
        return empty(plan.out_shape, dtype=x.dtype, device=x.device)
    if use_triton("ggml_matmul", x):
        return plan(x, raw)
    return ref.matmul(x, raw, plan.t, plan.n, plan.k)


def ggml_matmul(x: torch.Tensor, raw: torch.Tensor, ggml_type: TypeArg, shape: Sequence[int]) -> torch.Tensor:
    """``x @ W.T`` computed directly on the raw GGUF blocks of ``W [N, K]``.

    The decode kernels (up to 16 rows of x) dequantize blocks in registers (Q4_0, Q4_1 and
    Q4_K rows with bf16/fp16 x straight into tensor-core operands, ``quant/mmv.py``, where
    ``mmv.prefer`` says, which also takes Q4_K up to 128 rows and Q4_0 / Q4_1 up to 64);
    more rows dequantize L2-sized chunks of W (a bounded workspace, never the whole
    matrix) for cuBLAS. Fused decode kernels exist for Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K
    and F32/F16/BF16; the other types of :func:`ggml_dequantize` run dequantize + matmul.

    Args:
        x: ``[..., K]`` float32/float16/bfloat16.
        raw: uint8 bytes of W as in the file.
        ggml_type: int, ``gguf.GGMLQuantizationType`` or name.
        shape: ``(N, K)``: rows are output features.

    Returns:
        ``[..., N]`` in x's dtype (fp32 accumulation).

    Raises:
        as :func:`ggml_dequantize`; InvalidArgumentError when x's last dim is not K.

    Example:
        >>> y = mn.ggml_matmul(h, raw_q4k, "Q4_K", (14336, 4096))
    """
    return _ggml_matmul(x, raw, _type_id("ggml_matmul", ggml_type), _shape_list(shape))


# --------------------------------------------------------------------------- ggml_embedding

def _validate_emb(ids, raw, type_id, shape, dtype):
    op = "ggml_embedding"
    t = formats.parse_type(op, type_id)
    dims = formats.parse_shape(op, shape, t, min_ndim=2)
    if len(dims) != 2:
        raise InvalidArgumentError(f"{op}: shape must be (vocab, hidden), got {tuple(dims)}")
    checks.check_tensor(op, "ids", ids, (torch.int32, torch.int64), min_ndim=0)
    checks.check_same_device(op, "raw", raw, ids=ids)
    check_raw(op, raw, t, dims)
    _check_out_dtype(op, dtype)
    return t, dims


def _emb_plan(ids, raw, type_id, shape, dtype):
    t, dims = _validate_emb(ids, raw, type_id, shape, dtype)
    from .kernel import EmbeddingPlan

    return EmbeddingPlan(ids, raw, t, dims, dtype)


_EMB_PLANS = PlanCache(_emb_plan)


def _fake_emb(ids, raw, type_id, shape, dtype):
    _, dims = _validate_emb(ids, raw, type_id, shape, dtype)
    return raw.new_empty((*ids.shape, dims[1]), dtype=dtype)


@register_op("ggml_embedding", fake=_fake_emb)
def _ggml_embedding(ids: torch.Tensor, raw: torch.Tensor, type_id: int, shape: list[int],
                    dtype: torch.dtype) -> torch.Tensor:
    plan = _EMB_PLANS.get((tensor_key(ids), tensor_key(raw), type_id, tuple(shape), dtype), ids, raw, type_id,
                          shape, dtype)
    checks.check_index_range("ggml_embedding", "ids", ids, plan.shape[0], "rows")
    if plan.numel == 0:
        return empty(plan.out_shape, dtype=dtype, device=raw.device)
    if use_triton("ggml_embedding", raw):
        return plan(ids, raw)
    return ref.rows(raw, plan.t, plan.shape[1], ids, dtype)


def ggml_embedding(ids: torch.Tensor, raw: torch.Tensor, ggml_type: TypeArg, shape: Sequence[int], *,
                   dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Embedding lookup on a quantized ``[vocab, hidden]`` GGUF table: dequantizes only the rows in ``ids``.

    Args:
        ids: int32/int64 token ids, any shape.
        raw, ggml_type: as in :func:`ggml_dequantize`.
        shape: ``(vocab, hidden)``.
        dtype: output dtype.

    Returns:
        ``ids.shape + (hidden,)`` in ``dtype``. Ids out of range raise on CPU tensors; on CUDA
        (where checking would sync) their rows come out NaN.

    Example:
        >>> h = mn.ggml_embedding(tokens, raw_q8, "Q8_0", (49152, 576), dtype=torch.bfloat16)
    """
    return _ggml_embedding(ids, raw, _type_id("ggml_embedding", ggml_type), _shape_list(shape), dtype)
