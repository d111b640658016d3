"""GGML tensor types: ids, names, block geometry, and the argument parser.

A GGUF tensor of logical shape ``(..., K)`` (rows = output features for a
weight) is stored row by row; each row is ``K / block_elems`` blocks of
``block_bytes`` bytes (llama.cpp's ``ggml-common.h`` layouts, also described by
the ``gguf`` Python package's ``gguf.quants``). F32/F16/BF16 are "blocks" of one
element so every GGUF tensor can be handled the same way.
"""

from __future__ import annotations

from typing import NamedTuple

from ...errors import InvalidArgumentError, UnsupportedError


class GGMLType(NamedTuple):
    id: int
    name: str
    block_elems: int
    block_bytes: int


# ids are llama.cpp's enum ggml_type (== gguf.GGMLQuantizationType)
_TYPES = [
    GGMLType(0, "F32", 1, 4),
    GGMLType(1, "F16", 1, 2),
    GGMLType(2, "Q4_0", 32, 18),
    GGMLType(3, "Q4_1", 32, 20),
    GGMLType(6, "Q5_0", 32, 22),
    GGMLType(7, "Q5_1", 32, 24),
    GGMLType(8, "Q8_0", 32, 34),
    GGMLType(10, "Q2_K", 256, 84),
    GGMLType(11, "Q3_K", 256, 110),
    GGMLType(12, "Q4_K", 256, 144),
    GGMLType(13, "Q5_K", 256, 176),
    GGMLType(14, "Q6_K", 256, 210),
    GGMLType(30, "BF16", 1, 2),
]
BY_ID = {t.id: t for t in _TYPES}
BY_NAME = {t.name: t for t in _TYPES}

F32, F16, BF16 = BY_NAME["F32"], BY_NAME["F16"], BY_NAME["BF16"]
FLOAT_TYPES = (F32.id, F16.id, BF16.id)
DEQUANT_TYPES = tuple(t.id for t in _TYPES)
# types with a fused matmul kernel (others: dequantize + matmul)
MATMUL_TYPES = tuple(BY_NAME[n].id for n in ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"))


def _names(ids) -> str:
    return ", ".join(BY_ID[i].name for i in ids)


def parse_type(op: str, ggml_type: object, supported: tuple[int, ...] = DEQUANT_TYPES) -> GGMLType:
    """``ggml_type`` as an int, a ``gguf.GGMLQuantizationType`` or a name ("Q4_K", "q8_0")."""
    if isinstance(ggml_type, str):
        t = BY_NAME.get(ggml_type.strip().upper())
        if t is None:
            raise UnsupportedError(f"{op}: ggml_type {ggml_type!r} is not supported; supported: {_names(supported)}")
    else:
        try:
            tid = int(ggml_type)  # IntEnum members and plain ints
        except (TypeError, ValueError):
            raise InvalidArgumentError(
                f"{op}: ggml_type must be an int, a gguf.GGMLQuantizationType or a name, got {ggml_type!r}") from None
        t = BY_ID.get(tid)
        if t is None:
            name = getattr(ggml_type, "name", None) or _gguf_name(tid)
            raise UnsupportedError(
                f"{op}: ggml_type {name or tid} (id {tid}) is not supported; supported: {_names(supported)}")
    if t.id not in supported:
        raise UnsupportedError(f"{op}: ggml_type {t.name} is not supported; supported: {_names(supported)}")
    return t


def _gguf_name(tid: int) -> str | None:
    try:
        import gguf

        return gguf.GGMLQuantizationType(tid).name
    except Exception:  # noqa: BLE001 - unknown id or package missing: the number is named instead
        return None


def parse_shape(op: str, shape: object, t: GGMLType, min_ndim: int = 1) -> tuple[int, ...]:
    """The logical shape: a sequence of positive ints whose last is a multiple of the block."""
    try:
        dims = tuple(int(s) for s in shape)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{op}: shape must be a sequence of ints, got {shape!r}") from None
    if len(dims) < min_ndim or any(d < 0 for d in dims):
        raise InvalidArgumentError(f"{op}: shape must have at least {min_ndim} non-negative dims, got {dims}")
    if dims and dims[-1] % t.block_elems:
        raise InvalidArgumentError(
            f"{op}: the last dim of shape {dims} is not a multiple of {t.block_elems}, the block size of {t.name}")
    return dims


def row_bytes(t: GGMLType, k: int) -> int:
    return k // t.block_elems * t.block_bytes
