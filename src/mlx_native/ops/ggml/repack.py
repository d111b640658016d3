"""Lossless repack of GGUF Q4_0 / Q4_1 blocks into the MLX affine 4-bit layout (group size 32).

A GGUF block of 32 values interleaves its scale fields with 16 bytes of codes
(byte ``l`` holds value ``l`` in its low nibble and value ``l + 16`` in its high
nibble, :mod:`.ref`). The MLX affine layout (:mod:`..quant.ref`) keeps the codes
of a row as uint32 words, nibble ``p`` of word ``j`` being column ``8j + p``, and
the per-group ``scales`` / ``biases`` in separate ``[..., K / 32]`` tensors, so
the mat-vec kernels read codes with 16-byte loads. Both formats are
``w = scale * q + bias`` with a 4-bit ``q``:

* Q4_1 (fp16 d, fp16 m): ``w = d * q + m``: scale = d, bias = m.
* Q4_0 (fp16 d): ``w = d * (q - 8) = d * q - 8d``: scale = d, bias = -8d, exact in
  fp16 unless ``|8d|`` overflows it (finite ``|d| > 8188``); then the whole
  tensor's scales and biases are float32.

``mn.dequantize(w_q, scales, biases, 32, 4)`` (fp32 math) then equals
``mn.ggml_dequantize(raw, type, shape, dtype=torch.float32)`` value for value
(``d * q - 8d`` is the exact ``d * (q - 8)``; the Q4_1 math is the same
operations in the same order). Two caveats, both Q4_0: a code 8 with a negative d
is -0.0 in GGML and +0.0 here; a block with an infinite d (+-inf and NaN values in
GGML, a corrupt file) is all NaN here (``inf * q - 8 * inf``).
"""

from __future__ import annotations

from typing import Sequence

import torch

from . import formats
from .api import TypeArg, check_raw

OP = "ggml_to_affine"
REPACK_TYPES = (formats.BY_NAME["Q4_0"].id, formats.BY_NAME["Q4_1"].id)
GROUP_SIZE = 32
BITS = 4
# largest fp16 d whose 8 * d is finite in fp16 (8 * 8188 = 65504)
Q4_0_MAX_D = 8188.0


def _codes(qs: torch.Tensor) -> torch.Tensor:
    """``[n, 16]`` GGUF code bytes -> ``[n, 16]`` bytes of the 4 affine words of each block.

    Byte ``i`` of the affine words holds values ``2i`` (low nibble) and ``2i + 1``
    (high nibble); GGUF values ``0..15`` are the low nibbles of bytes ``0..15``,
    values ``16..31`` their high nibbles.
    """
    even, odd = qs[:, 0::2], qs[:, 1::2]  # [n, 8]: bytes holding values (2i, 2i + 16) / (2i + 1, 2i + 17)
    low = (even & 0x0F) | (odd << 4)  # values 2i, 2i + 1 for i < 8
    high = (even >> 4) | (odd & 0xF0)  # values 16 + 2i, 17 + 2i
    return torch.cat([low, high], dim=1)


def _f16(blocks: torch.Tensor, off: int) -> torch.Tensor:
    """fp16 field at byte ``off`` of each block: ``[n]`` float16."""
    return blocks[:, off:off + 2].contiguous().view(torch.float16).reshape(-1)


def ggml_to_affine(raw: torch.Tensor, ggml_type: TypeArg, shape: Sequence[int]
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """GGUF Q4_0 / Q4_1 blocks -> MLX affine 4-bit, group size 32, without loss.

    Pure torch ops on raw's device (CPU or CUDA); meant for load time. A Q4_0 tensor
    with a finite ``|d| > 8188`` (whose ``-8d`` bias overflows fp16) is returned
    with float32 scales and biases (one host sync to find out).

    Args:
        raw: uint8 (or int8) contiguous bytes of the tensor as in the file
            (``[N, row_bytes]`` or flat), as :func:`ggml_dequantize` takes.
        ggml_type: Q4_0 or Q4_1 (int, ``gguf.GGMLQuantizationType`` or name).
        shape: logical shape ``(..., K)``, e.g. ``(N, K)``; K a multiple of 32.

    Returns:
        ``(w_q, scales, biases)``: ``w_q`` uint32 ``[..., K / 8]`` (nibble ``p`` of word
        ``j`` is column ``8j + p``), ``scales`` / ``biases`` ``[..., K / 32]`` float16
        (float32 in the Q4_0 overflow case), for ``group_size=32, bits=4``.

    Raises:
        UnsupportedError (a type other than Q4_0 / Q4_1), FormatError (byte count that does
        not match ``shape``), InvalidArgumentError (shape, raw not contiguous or not bytes).

    Example:
        >>> w_q, s, b = mn.ggml_to_affine(raw, "Q4_0", (4096, 4096))
        >>> y = mn.quantized_matmul(x, w_q, s, b, transpose=True, group_size=32, bits=4)
    """
    t = formats.parse_type(OP, ggml_type, REPACK_TYPES)
    dims = formats.parse_shape(OP, shape, t)
    check_raw(OP, raw, t, dims)
    lead, k = dims[:-1], dims[-1]
    blocks = raw.reshape(-1, t.block_bytes)
    if raw.dtype != torch.uint8:
        blocks = blocks.view(torch.uint8)
    d = _f16(blocks, 0)
    if t.name == "Q4_1":
        scales, biases = d, _f16(blocks, 2)
        qs = blocks[:, 4:20]
    else:
        d32 = d.to(torch.float32)
        overflow = bool(((d32.abs() > Q4_0_MAX_D) & torch.isfinite(d32)).any())
        scales = d32 if overflow else d
        biases = -8.0 * d32  # exact in fp32; exact in fp16 too when nothing overflows
        if not overflow:
            biases = biases.to(torch.float16)
        qs = blocks[:, 2:18]
    if blocks.shape[0] == 0:  # a byte view of an empty tensor need not be viewable as words
        words = torch.empty((*lead, k // 8), dtype=torch.uint32, device=raw.device)
    else:
        words = _codes(qs).reshape(*lead, k // 2).view(torch.uint32)
    groups = (*lead, k // GROUP_SIZE)
    return words, scales.reshape(groups), biases.reshape(groups)
