"""Weight containers produced by the loaders and consumed by the models.

A loader returns every tensor of a checkpoint as one of three kinds, named by
its Hugging Face / mlx-lm name (``model.layers.0.self_attn.q_proj.weight``):

* :class:`DenseWeight`: a plain float tensor (F32/F16/BF16).
* :class:`GGMLWeight`: raw GGUF block bytes (``uint8 [rows, row_bytes]``) of a
  ``[out, in]`` matrix in one of the GGML block types; the quantized matmul
  ops read these bytes directly.
* :class:`AffineWeight`: MLX affine quantization (``mx.quantize``): packed
  ``uint32 [out, in * bits / 32]`` plus ``scales``/``biases`` ``[out, in / group_size]``.

Weights are created on the CPU (memory-mapped where the format allows) and
moved with :meth:`to`.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Union

import torch


@dataclasses.dataclass
class DenseWeight:
    data: torch.Tensor

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def quant(self) -> str:
        return {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}.get(
            self.data.dtype, str(self.data.dtype).replace("torch.", "").upper())

    @property
    def nbytes(self) -> int:
        return self.data.numel() * self.data.element_size()

    def to(self, device=None, dtype: Optional[torch.dtype] = None) -> "DenseWeight":
        return DenseWeight(self.data.to(device=device, dtype=dtype if self.data.is_floating_point() else None))


@dataclasses.dataclass
class GGMLWeight:
    """Raw GGML blocks of a ``shape = (out, in)`` matrix (a 1-D ``(n,)`` vector, or an ``(experts, out, in)`` stack).

    ``raw`` is ``uint8 [rows, row_bytes]``: each row of the matrix is an
    independent run of blocks, so rows can be gathered (embeddings) or
    concatenated (fused q/k/v) on the bytes.
    """

    raw: torch.Tensor
    ggml_type: int
    type_name: str
    shape: tuple[int, ...]

    @property
    def quant(self) -> str:
        return self.type_name

    @property
    def nbytes(self) -> int:
        return self.raw.numel()

    def to(self, device=None, dtype: Optional[torch.dtype] = None) -> "GGMLWeight":
        return GGMLWeight(self.raw.to(device=device), self.ggml_type, self.type_name, self.shape)


@dataclasses.dataclass
class AffineWeight:
    """MLX affine-quantized ``[out, in]`` matrix (or ``[experts, out, in]`` stack, mlx-lm's ``SwitchLinear``):
    ``w = scale * q + bias`` per group of ``group_size``."""

    weight: torch.Tensor  # uint32 [..., out, in * bits / 32]
    scales: torch.Tensor  # [..., out, in / group_size]
    biases: torch.Tensor  # [..., out, in / group_size]
    group_size: int
    bits: int

    @property
    def shape(self) -> tuple[int, ...]:
        return (*self.weight.shape[:-1], self.weight.shape[-1] * 32 // self.bits)

    @property
    def quant(self) -> str:
        return f"affine-{self.bits}bit-g{self.group_size}"

    @property
    def scheme(self) -> tuple:
        """``(group_size, bits, scales dtype)``: weights of one scheme run in one quantized op."""
        return (self.group_size, self.bits, self.scales.dtype)

    @property
    def tensors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(weight, scales, biases)``, as the quantized ops take them."""
        return (self.weight, self.scales, self.biases)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.weight, self.scales, self.biases))

    def to(self, device=None, dtype: Optional[torch.dtype] = None) -> "AffineWeight":
        sdt = dtype if dtype is not None else None
        return AffineWeight(self.weight.to(device=device), self.scales.to(device=device, dtype=sdt),
                            self.biases.to(device=device, dtype=sdt), self.group_size, self.bits)


Weight = Union[DenseWeight, GGMLWeight, AffineWeight]


@dataclasses.dataclass
class Checkpoint:
    """What a loader returns.

    Attributes:
        path: the file or directory.
        format: "gguf", "mlx" or "hf".
        config: model config in Hugging Face ``config.json`` form (``model_type``,
            ``hidden_size``...), plus loader facts under ``_mlx_native`` keys.
        weights: Hugging Face tensor name -> weight (on the CPU).
        metadata: GGUF key/values (tokenizer arrays excluded) or safetensors metadata.
        tokenizer: what the tokenizer needs: ``{"gguf": {...}}`` from GGUF
            metadata or ``{"dir": path}`` for a ``tokenizer.json`` directory.
    """

    path: str
    format: str
    config: dict
    weights: dict[str, Weight]
    metadata: dict
    tokenizer: dict

    @property
    def total_bytes(self) -> int:
        return sum(w.nbytes for w in self.weights.values())

    @property
    def num_parameters(self) -> int:
        n = 0
        for w in self.weights.values():
            size = 1
            for s in w.shape:
                size *= s
            n += size
        return n
