"""Building blocks shared by the architectures: linear layers over any weight
kind, embeddings, the static KV cache of a model, and the decoder driver
(chunked prefill, graph-safe decode step).

Everything here calls mlx-native ops (or plain tensor arithmetic and views);
nothing launches a kernel directly.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Any, Optional, Sequence, Union

import torch

import mlx_native as mn

from ..errors import FormatError, InvalidArgumentError, UnsupportedError
from ..formats.weights import AffineWeight, Checkpoint, DenseWeight, GGMLWeight, Weight
from ..kernels.increment import increment_
from ..ops.activations.api import gated_mul
from ..ops.ggml.kernel import takes_streamed
from ..ops.ggml.matmul_norm import (ggml_gated_matmul, ggml_matmul_add_rms_norm_handoff, handoff_ggml_matmul,
                                    kernel_takes)
from ..ops.quant import affine_idot
from ..ops.quant.matmul_norm import NormHandoff, handoff_matmul, matmul_add_rms_norm_handoff


# ---------------------------------------------------------------------------- weights on a device

@dataclasses.dataclass
class LoadOptions:
    """How a checkpoint becomes a model.

    Attributes:
        device: where the weights live and the model runs.
        dtype: activation dtype (float32 on CPU; bfloat16 by default on CUDA).
        keep_quantized: keep GGML / MLX-affine weights packed and run the
            quantized matmul ops on them (default on CUDA); False dequantizes
            once at load (default on CPU, where the reference matmul would
            otherwise dequantize on every call).
        progress: a callable ``progress(n)`` called as tensors are placed.
        fused_mlp_decode: decode steps (<= 16 rows) run the quantized gate/up
            projections and the activation as one kernel (the routed-expert op
            with a single expert) instead of a matmul plus ``silu_mul``/``gelu_mul``.
            None (default): on for GGML-block pairs that one-row matmuls would run on
            the word-level kernel (one launch with the pair and the activation:
            SmolLM2-135M 1196 -> 1238 tok/s on the H100); off for pairs that take a
            streamed one-row kernel (``q4k_mv``, ``q4_mv``: GGML
            ``ops.ggml.kernel.takes_streamed``: those take no pair and beat the routed
            kernel, Llama-3-8B-shaped Q4_K model 1925 against 841 tok/s,
            bench/results/2026-11-22-h100-session5/); for MLX-affine pairs that the
            integer-dot mat-vec takes, on for one-row steps only (it takes the pair:
            ``ops.quant.affine_idot``), else off.
        repack_gguf: with ``keep_quantized``, Q4_0/Q4_1 GGUF matrices become MLX
            affine (group 32) at load, losslessly (:func:`mn.ggml_to_affine`), so they
            run the affine kernels. Only where ``quantized_matmul`` then still returns
            ``dtype``: the lossless scales/biases are float16 (float32 for a Q4_0 tensor
            whose ``-8 d`` overflows fp16), and MLX's rule promotes bfloat16 activations
            with them to a float32 result, so a bfloat16 model (and an overflowing
            tensor in a float16 model) keeps the GGML blocks. Embedding tables stay GGML
            blocks too (their row lookup would round through the fp16 scales).
        fused_decode_attention: decode steps rotate q and the new k, write the KV
            cache and attend in one launch (``flash_attn_decode(k_new=, rope=)``).
        norm_handoff: for a decode row on MLX affine 4-bit or GGUF Q4_K / Q4_0 / Q4_1 weights, an o / down
            projection hands the residual add + RMS norm after it to the next
            projections' launch when they take it (``kernels/norm_handoff.py``: no norm
            launch; 8B-shaped model on the H100 2729 against 2616 tok/s before the decode kernels were
            programmatic dependents, +0.2-0.9% since: bench/results/2026-11-26-session24, run 4); False
            launches ``add_rms_norm``.
    """

    device: torch.device
    dtype: torch.dtype
    keep_quantized: bool
    progress: Any = None
    fused_mlp_decode: Optional[bool] = None
    repack_gguf: bool = False
    fused_decode_attention: bool = True
    norm_handoff: bool = True


REPACK_TYPES = ("Q4_0", "Q4_1")


def place(w: Weight, opts: LoadOptions, *, keep_quantized: Optional[bool] = None,
          repack: Optional[bool] = None) -> Weight:
    """Move a weight to the device in the form the model runs it.

    ``keep_quantized`` / ``repack`` (default: ``opts.keep_quantized`` / ``opts.repack_gguf``)
    override the options for this weight; a kept Q4_0/Q4_1 matrix with ``repack`` becomes an
    :class:`AffineWeight` (group 32, 4 bits) built on the device, where its fp16 (fp32)
    scales keep ``quantized_matmul``'s result in ``opts.dtype`` (see :class:`LoadOptions`).
    """
    keep = opts.keep_quantized if keep_quantized is None else keep_quantized
    repack = opts.repack_gguf if repack is None else repack
    if isinstance(w, DenseWeight):
        out = DenseWeight(w.data.to(device=opts.device, dtype=opts.dtype))
    elif isinstance(w, GGMLWeight):
        raw = w.raw.to(opts.device)
        if w.type_name in ("F32", "F16", "BF16"):
            out = DenseWeight(mn.ggml_dequantize(raw, w.ggml_type, w.shape, dtype=opts.dtype))
        elif keep:
            out = GGMLWeight(raw.contiguous(), w.ggml_type, w.type_name, w.shape)
            if (repack and w.type_name in REPACK_TYPES and len(w.shape) == 2
                    and torch.promote_types(opts.dtype, torch.float16) == opts.dtype):
                w_q, scales, biases = mn.ggml_to_affine(out.raw, w.ggml_type, w.shape)
                # fp32 scales (Q4_0 overflow) would turn a 16-bit model's matmul outputs into fp32
                if torch.promote_types(opts.dtype, scales.dtype) == opts.dtype:
                    out = AffineWeight(w_q, scales, biases, 32, 4)
        else:
            out = DenseWeight(mn.ggml_dequantize(raw.contiguous(), w.ggml_type, w.shape, dtype=opts.dtype))
    elif isinstance(w, AffineWeight):
        packed = AffineWeight(w.weight.to(opts.device), w.scales.to(opts.device), w.biases.to(opts.device),
                              w.group_size, w.bits)
        if keep:
            out = packed
        else:
            deq = mn.dequantize(packed.weight, packed.scales, packed.biases, packed.group_size, packed.bits)
            out = DenseWeight(deq.to(opts.dtype))
    else:  # pragma: no cover
        raise TypeError(type(w))
    if opts.progress is not None:
        opts.progress(1)
    return out


def vector(w: Weight, opts: LoadOptions, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A 1-D parameter (norm weight, bias) as a dense tensor of ``dtype`` on the device."""
    if isinstance(w, DenseWeight):
        t = w.data
    elif isinstance(w, GGMLWeight):
        t = mn.ggml_dequantize(w.raw.contiguous(), w.ggml_type, w.shape, dtype=torch.float32)
    else:
        t = mn.dequantize(w.weight, w.scales, w.biases, w.group_size, w.bits).float()
    if opts.progress is not None:
        opts.progress(1)
    return t.reshape(-1).to(device=opts.device, dtype=dtype)


class Linear:
    """``y = x @ W.T (+ b)`` on a dense, GGML-block or MLX-affine weight ``W [out, in]``."""

    def __init__(self, weight: Weight, bias: Optional[torch.Tensor] = None):
        self.weight = weight
        self.bias = bias
        self.out_features, self.in_features = weight.shape[0], weight.shape[-1]
        if isinstance(weight, DenseWeight):
            self._wt = weight.data  # [out, in]

    def __call__(self, x: Union[torch.Tensor, NormHandoff]) -> torch.Tensor:
        w = self.weight
        if isinstance(x, NormHandoff):
            if isinstance(w, AffineWeight):
                y = handoff_matmul(x, w.weight, w.scales, w.biases, group_size=w.group_size, bits=w.bits)
                return y if self.bias is None else y + self.bias
            if isinstance(w, GGMLWeight):
                y = handoff_ggml_matmul(x, w.raw, w.ggml_type, w.shape)
                return y if self.bias is None else y + self.bias
            x = x.normed()
        if isinstance(w, DenseWeight):
            y = torch.nn.functional.linear(x, self._wt)
        elif isinstance(w, GGMLWeight):
            y = mn.ggml_matmul(x, w.raw, w.ggml_type, w.shape)
        else:
            y = mn.quantized_matmul(x, w.weight, w.scales, w.biases, transpose=True, group_size=w.group_size,
                                    bits=w.bits)
        if self.bias is not None:
            y = y + self.bias
        return y

    def takes_handoff(self, dtype: torch.dtype) -> bool:
        """A one-row :class:`NormHandoff` of ``dtype`` activations runs in this projection's launch (MLX affine or
        GGUF Q4_K / Q4_0 / Q4_1 weights the integer-dot mat-vecs take); else the call would first materialize the
        normed row."""
        w = self.weight
        if isinstance(w, GGMLWeight):
            return len(w.shape) == 2 and kernel_takes(w.ggml_type, dtype, *w.shape, w.raw)
        return isinstance(w, AffineWeight) and w.scales.dtype == dtype and w.biases.dtype == dtype and \
            affine_idot.supports(w.bits, w.group_size, True, dtype, dtype, 1, w.shape[1], w.weight.numel())

    def matmul_add_rms_norm(self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                            handoff: bool = False) -> tuple[Union[torch.Tensor, NormHandoff], torch.Tensor]:
        """``add_rms_norm(self(x), residual, weight, eps)`` -> ``(normed, h)``. For a decode row on MLX affine
        4-bit or GGUF Q4_K / Q4_0 / Q4_1 weights, with ``handoff`` (the caller feeds ``normed`` to projections whose
        ``takes_handoff``), ``normed`` is a :class:`NormHandoff` that the next projection's launch finishes; else
        the two ops."""
        w = self.weight
        hand = None
        if handoff and isinstance(w, AffineWeight) and self.bias is None:
            hand = matmul_add_rms_norm_handoff(x, w.weight, w.scales, w.biases, residual, weight, eps,
                                               group_size=w.group_size, bits=w.bits)
        elif handoff and isinstance(w, GGMLWeight) and self.bias is None and len(w.shape) == 2:
            hand = ggml_matmul_add_rms_norm_handoff(x, w.raw, w.ggml_type, w.shape, residual, weight, eps)
        if hand is not None:
            return hand, hand.h
        return mn.add_rms_norm(self(x), residual, weight, eps)

    @staticmethod
    def fuse(parts: Sequence["Linear"]) -> Optional["Linear"]:
        """One Linear computing ``cat([p(x) for p in parts], -1)``, or None when the
        weights cannot be concatenated (different kinds or quantization types)."""
        ws = [p.weight for p in parts]
        first = ws[0]
        if any(type(w) is not type(first) for w in ws):
            return None
        if any(p.in_features != parts[0].in_features for p in parts):
            return None
        if isinstance(first, DenseWeight):
            if any(w.data.dtype != first.data.dtype for w in ws):
                return None
            weight: Weight = DenseWeight(torch.cat([w.data for w in ws], 0))
        elif isinstance(first, GGMLWeight):
            if any(w.ggml_type != first.ggml_type for w in ws):
                return None
            raw = torch.cat([w.raw for w in ws], 0)
            weight = GGMLWeight(raw, first.ggml_type, first.type_name,
                                (sum(w.shape[0] for w in ws), first.shape[1]))
        else:
            if any(w.scheme != first.scheme for w in ws):
                return None
            weight = AffineWeight(torch.cat([w.weight for w in ws]), torch.cat([w.scales for w in ws]),
                                  torch.cat([w.biases for w in ws]), first.group_size, first.bits)
        biases = [p.bias for p in parts]
        bias = None
        if any(b is not None for b in biases):
            bias = torch.cat([b if b is not None else torch.zeros(p.out_features, dtype=biases[0].dtype,
                                                                     device=biases[0].device)
                              for b, p in zip(biases, parts)])
        return Linear(weight, bias)


class GatedMLP:
    """``down(act(gate(x)) * up(x))`` with gate/up fused into one projection when possible;
    optionally one fused kernel (projections + activation) for decode rows."""

    MAX_FUSED_ROWS = 16

    def __init__(self, gate: Linear, up: Linear, down: Linear, activation: str,
                 fused_decode: Optional[bool] = False, act_dtype: torch.dtype = torch.bfloat16):
        self.inter = gate.out_features
        self.activation = activation  # "silu" or "gelu_tanh"
        self.gate_up = Linear.fuse([gate, up])
        self.parts = None if self.gate_up is not None else (gate, up)
        self.down = down
        self.fused = None
        self.fused_rows = self.MAX_FUSED_ROWS
        w = self.gate_up.weight if self.gate_up is not None else None
        if fused_decode is None:  # LoadOptions.fused_mlp_decode's default, for activations of act_dtype
            if isinstance(w, AffineWeight):
                fused_decode = affine_idot.supports(w.bits, w.group_size, True, act_dtype, act_dtype, 1, w.shape[1],
                                                    w.weight.numel() // 2, pairs=True)
                self.fused_rows = 1
            else:
                fused_decode = isinstance(w, GGMLWeight) and not takes_streamed(
                    w.ggml_type, act_dtype, 1, w.shape[0], w.shape[1], w.raw.device)
        if fused_decode and self.gate_up is not None and self.gate_up.bias is None:
            if isinstance(w, GGMLWeight):
                self.fused = ("ggml", w.raw[: self.inter], w.raw[self.inter:], w.ggml_type,
                              (1, self.inter, w.shape[1]))
            elif isinstance(w, AffineWeight):
                i = self.inter
                self.fused = ("affine", w.weight[:i][None], w.scales[:i][None], w.biases[:i][None],
                              w.weight[i:][None], w.scales[i:][None], w.biases[i:][None], w.group_size, w.bits)
        if self.fused is not None:
            # expert ids of the single "expert", preallocated so decode steps stay graph-capturable
            self._ids = torch.zeros(self.MAX_FUSED_ROWS, 1, dtype=torch.int32, device=w.raw.device if isinstance(
                w, GGMLWeight) else w.weight.device)

    def takes_handoff(self, dtype: torch.dtype) -> bool:
        """A one-row :class:`NormHandoff` runs in the fused gate/up launch (MLX affine) or in the gate/up
        projection's (GGUF, then the activation; see :meth:`Linear.takes_handoff`)."""
        if self.fused is not None:
            return self.fused[0] == "affine" and self.gate_up.takes_handoff(dtype)
        return self.gate_up is not None and isinstance(self.gate_up.weight, GGMLWeight) and \
            self.gate_up.takes_handoff(dtype)

    def _ggml_gate_up(self) -> Optional[GGMLWeight]:
        """The stacked GGUF gate/up weight (no bias), which ``ggml_gated_matmul`` runs with the activation."""
        g = self.gate_up
        if g is not None and g.bias is None and isinstance(g.weight, GGMLWeight) and len(g.weight.shape) == 2:
            return g.weight
        return None

    def _act(self, g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return gated_mul(g, u, self.activation)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.hidden(x))

    def hidden(self, x: Union[torch.Tensor, NormHandoff]) -> torch.Tensor:
        """``act(gate(x)) * up(x)``: the input of the down projection."""
        if isinstance(x, NormHandoff):
            f = self.fused
            if f is not None and f[0] == "affine":
                return handoff_matmul(x, f[1][0], f[2][0], f[3][0], group_size=f[7], bits=f[8],
                                      up=(f[4][0], f[5][0], f[6][0]), activation=self.activation)
            if f is None and self._ggml_gate_up() is not None:  # in the gate/up launch, or the two ops
                w = self._ggml_gate_up()
                return handoff_ggml_matmul(x, w.raw, w.ggml_type, w.shape, activation=self.activation)
            if f is None and self.gate_up is not None:  # Linear takes it or materializes the normed row
                gu = self.gate_up(x)
                return self._act(gu[..., : self.inter], gu[..., self.inter:])
            x = x.normed()
        rows = x.numel() // x.shape[-1]
        if self.fused is not None and rows <= self.fused_rows:
            x2 = x.reshape(rows, x.shape[-1])
            ids = self._ids[:rows]
            f = self.fused
            if f[0] == "ggml":
                h = mn.moe_ggml_matmul(x2, ids, f[1], f[3], f[4], raw_up=f[2], activation=self.activation)
            else:
                h = mn.moe_qmm(x2, ids, f[1], f[2], f[3], group_size=f[7], bits=f[8], w_up=f[4], scales_up=f[5],
                               biases_up=f[6], activation=self.activation)
            return h.reshape(*x.shape[:-1], self.inter)
        w = self._ggml_gate_up()
        if w is not None:  # one launch for a decode row where the integer-dot kernels take it
            return ggml_gated_matmul(x, w.raw, w.ggml_type, w.shape, self.activation)
        if self.gate_up is not None:
            gu = self.gate_up(x)
            return self._act(gu[..., : self.inter], gu[..., self.inter:])
        gate, up = self.parts
        return self._act(gate(x), up(x))


class Embedding:
    """Token embedding over a dense, GGML-block or MLX-affine table ``[vocab, hidden]``."""

    def __init__(self, weight: Weight, dtype: torch.dtype):
        self.weight = weight
        self.dtype = dtype
        self.num_embeddings, self.dim = weight.shape

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        w = self.weight
        if isinstance(w, DenseWeight):
            return w.data[ids]
        if isinstance(w, GGMLWeight):
            return mn.ggml_embedding(ids, w.raw, w.ggml_type, w.shape, dtype=self.dtype)
        return mn.quantized_embedding(ids, w.weight, w.scales, w.biases, w.group_size, w.bits, dtype=self.dtype)


# ---------------------------------------------------------------------------- config helpers

def rope_freqs(head_dim: int, dims: int, base: float, scaling: Optional[dict], device,
               factors: Optional[torch.Tensor] = None) -> tuple[Optional[torch.Tensor], float]:
    """``(freqs, position_scale)`` for :func:`mn.rope` from a Hugging Face rope config.

    ``freqs`` (MLX convention: ``inv_freq = 1 / freqs``) is None for plain RoPE.
    Supported ``rope_type``: default, linear, llama3, proportional (Gemma 4),
    and llama.cpp frequency factors (``rope_freqs.weight``).
    """
    rtype = (scaling or {}).get("rope_type", (scaling or {}).get("type", "default")) or "default"
    i = torch.arange(dims // 2, dtype=torch.float64)
    if rtype == "default":
        freqs, scale = None, 1.0
    elif rtype == "linear":
        freqs, scale = None, 1.0 / float(scaling["factor"])
    elif rtype == "llama3":
        inv = base ** (-2.0 * i / dims)
        factor = float(scaling["factor"])
        lo, hi = float(scaling.get("low_freq_factor", 1.0)), float(scaling.get("high_freq_factor", 4.0))
        old = float(scaling["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv
        smooth = (old / wavelen - lo) / (hi - lo)
        scaled = torch.where(wavelen > old / lo, inv / factor, inv)
        mid = (1 - smooth) * inv / factor + smooth * inv
        is_mid = (wavelen <= old / lo) & (wavelen >= old / hi)
        inv = torch.where(is_mid, mid, scaled)
        freqs, scale = (1.0 / inv).float().to(device), 1.0
    elif rtype == "proportional":
        # Gemma 4 global layers: the first p * head_dim / 2 pairs rotate with exponents
        # 2i / head_dim; the remaining pairs do not rotate (inv_freq 0, freq inf).
        rope_angles = int(float(scaling.get("partial_rotary_factor", 1.0)) * head_dim // 2)
        j = torch.arange(head_dim // 2, dtype=torch.float64)
        inv = torch.where(j < rope_angles, base ** (-2.0 * j / head_dim), torch.zeros_like(j))
        inv = inv / float(scaling.get("factor", 1.0))
        freqs, scale = (1.0 / inv).float().to(device), 1.0
    else:
        raise UnsupportedError(f"rope_type {rtype!r} is not supported; supported: default, linear, llama3, "
                               f"proportional")
    if factors is not None:
        base_f = freqs if freqs is not None else (base ** (2.0 * i / dims)).float().to(device)
        freqs = base_f * factors.to(device=device, dtype=torch.float32)
    return freqs, scale


def config_get(cfg: dict, *names: str, default: Any = None) -> Any:
    for n in names:
        if n in cfg and cfg[n] is not None:
            return cfg[n]
    return default


# ---------------------------------------------------------------------------- KV cache

class ModelCache:
    """The static KV cache of a whole model: one :class:`mn.KVCache` (linear,
    ``capacity`` positions) per attention layer that owns K/V, one shared
    device ``lens [B]`` int32 tensor, and ``next_lens = lens + 1`` beside it (the KV length of a one-token
    decode step): both rows of ``counts [2, B]`` advance together in one launch per decode step.

    Layers that reuse another layer's K/V (Gemma 4 KV sharing) point at its cache.
    """

    def __init__(self, layer_shapes: Sequence[Optional[tuple[int, int]]], batch: int, capacity: int,
                 dtype: torch.dtype, device: torch.device, share: Optional[Sequence[Optional[int]]] = None):
        self.capacity = capacity
        self.batch = batch
        self.counts = torch.zeros(2, batch, dtype=torch.int32, device=device)
        self.lens, self.next_lens = self.counts[0], self.counts[1]
        self.next_lens.fill_(1)
        self.layers: list[Optional[mn.KVCache]] = []
        for i, shape in enumerate(layer_shapes):
            src = share[i] if share is not None else None
            if src is not None:
                self.layers.append(self.layers[src])
            elif shape is None:
                self.layers.append(None)
            else:
                n_kv, head_dim = shape
                self.layers.append(mn.KVCache(batch, n_kv, head_dim, capacity, dtype=dtype, device=device,
                                              lens=self.lens))
        self.offset = 0  # host copy of lens (same for every row): tokens already cached

    @property
    def nbytes(self) -> int:
        seen, n = set(), 0
        for c in self.layers:
            if c is not None and id(c) not in seen:
                seen.add(id(c))
                n += 2 * c.k.numel() * c.k.element_size()
        return n

    def reset(self) -> None:
        self.lens.zero_()
        self.next_lens.fill_(1)
        self.offset = 0

    def advance(self, length: int) -> None:
        """``lens += length`` on the device (no host sync; one launch when ``length`` is 1)."""
        if length == 1:
            increment_(self.counts)  # a programmatic dependent launch (kernels/increment.py)
        else:
            self.lens.add_(length)
            torch.add(self.lens, 1, out=self.next_lens)


# ---------------------------------------------------------------------------- model driver

DECODE_QUERIES_MAX = 8  # device-driven steps of up to this many tokens attend with flash_attn_decode


class Step:
    """What one forward pass needs besides the tokens (built by the model per call).

    Prefill (``start`` is an int, host-known): positions ``start .. start + L``,
    attention over the cache prefix ``[0, start + L)`` with ``flash_attn_prefill``.
    Device-driven (``start`` None): positions come from the device ``lens`` tensor, and the
    attention reads the cache up to ``lens + L`` (``flash_attn_decode`` for up to
    ``DECODE_QUERIES_MAX`` tokens, ``flash_attn_prefill(kv_lens=)`` for a longer chunk): no
    host value is read, so the step (a decode token or a prefill chunk) can be captured in a
    CUDA graph.
    """

    def __init__(self, cache: ModelCache, length: int, start: Optional[int], fused: bool = True):
        self.cache = cache
        self.fused = fused  # LoadOptions.fused_decode_attention
        self.length = length
        self.start = start
        lens = cache.lens
        if start is None:
            if length == 1:
                self.positions = lens[:, None]
                self.kv_lens = cache.next_lens
            else:
                self.positions = lens[:, None] + torch.arange(length, device=lens.device, dtype=torch.int32)
                self.kv_lens = lens + length
        else:
            self.positions = torch.arange(start, start + length, device=lens.device,
                                          dtype=torch.int32).expand(cache.batch, length)
            self.kv_lens = None

    def attend(self, layer: int, q: torch.Tensor, k: Optional[torch.Tensor], v: Optional[torch.Tensor], *,
               scale: float, window: Optional[int] = None, softcap: Optional[float] = None,
               rope: Optional[mn.RopeSpec] = None) -> torch.Tensor:
        """Write ``k, v [B, Hkv, L, D]`` (None: the layer reuses another layer's cache)
        and attend ``q [B, Hq, L, D]`` over the cache.

        ``rope``: q and k are not rotated yet; they are rotated at the step's positions. Decode steps do the
        rotation, the cache write and the attention in one launch (``flash_attn_decode(k_new=, rope=)``)."""
        kv = self.cache.layers[layer]
        few = self.length <= DECODE_QUERIES_MAX
        if self.start is None and self.fused and few:
            if k is not None:
                return mn.flash_attn_decode(q, kv.k, kv.v, self.cache.lens, k_new=k, v_new=v, rope=rope, scale=scale,
                                            window=window, softcap=softcap)
            return mn.flash_attn_decode(q, kv.k, kv.v, self.kv_lens, rope=rope, scale=scale, window=window,
                                        softcap=softcap)
        if rope is not None:
            rope_kw = dict(traditional=rope.traditional, base=rope.base, scale=rope.scale, freqs=rope.freqs,
                           positions=self.positions[:, None, :])
            if k is not None:
                q, k = mn.rope_qk(q, k, rope.dims, **rope_kw)
            else:
                q = mn.rope(q, rope.dims, **rope_kw)
        if k is not None:
            mn.kv_cache_write(kv.k, kv.v, self.cache.lens, k, v, advance=False)
        if self.start is None:
            if few:
                return mn.flash_attn_decode(q, kv.k, kv.v, self.kv_lens, scale=scale, window=window, softcap=softcap)
            return mn.flash_attn_prefill(q, kv.k, kv.v, scale=scale, causal=True, window=window, softcap=softcap,
                                         kv_lens=self.kv_lens)
        end = self.start + self.length
        return mn.flash_attn_prefill(q, kv.k[:, :, :end], kv.v[:, :, :end], scale=scale, causal=True,
                                     window=window, softcap=softcap)

    def finish(self) -> None:
        """Advance the cache past this step's tokens (device tensor, plus the host copy for prefill)."""
        self.cache.advance(self.length)
        self.cache.offset += self.length


class CausalLM(abc.ABC):
    """Base of the architectures: subclasses set up layers and implement ``_hidden``.

    Public surface used by the runner:
        ``config`` (the architecture's dataclass), ``vocab_size``, ``dtype``, ``device``,
        ``new_cache(batch, capacity)``, ``forward(tokens, cache, start=None, all_logits=False)``.
    """

    arch: str = "?"
    config: Any
    dtype: torch.dtype
    device: torch.device
    vocab_size: int
    max_context: int

    def _setup(self, cfg: Any, ckpt: Checkpoint, opts: LoadOptions) -> "WeightSource":
        """The common part of a constructor: config, dtype/device, vocabulary and context
        sizes from ``cfg``; returns the weight source of ``ckpt``."""
        self.config = cfg
        self.dtype, self.device = opts.dtype, opts.device
        self.fused_decode_attention = opts.fused_decode_attention
        self.vocab_size = cfg.vocab_size
        self.max_context = cfg.max_position_embeddings
        return WeightSource(ckpt, opts)

    @abc.abstractmethod
    def layer_cache_shapes(self) -> list[Optional[tuple[int, int]]]:
        """Per layer: ``(kv_heads, head_dim)`` of its KV cache, or None for a layer without one."""

    def layer_cache_share(self) -> Optional[list[Optional[int]]]:
        return None

    def new_cache(self, batch: int, capacity: int) -> ModelCache:
        if capacity <= 0:
            raise InvalidArgumentError(f"new_cache: capacity must be > 0, got {capacity}")
        return ModelCache(self.layer_cache_shapes(), batch, capacity, self.dtype, self.device,
                          self.layer_cache_share())

    def forward(self, tokens: torch.Tensor, cache: ModelCache, start: Optional[int] = None,
                all_logits: bool = False) -> torch.Tensor:
        """Logits of the last token (``[B, V]``), or of every token (``[B, L, V]``).

        ``start`` is the host-known position of ``tokens[:, 0]`` (prefill; it
        must equal the cache's length), or None for a graph-capturable decode
        step that reads the positions from ``cache.lens``.
        """
        if tokens.dim() != 2:
            raise InvalidArgumentError(f"forward: tokens must be [B, L], got shape {tuple(tokens.shape)}")
        b, length = tokens.shape
        if start is not None:
            if start != cache.offset:
                raise InvalidArgumentError(f"forward: start {start} != tokens already in the cache {cache.offset}")
            if start + length > cache.capacity:
                raise InvalidArgumentError(f"forward: {start + length} positions do not fit the cache capacity "
                                           f"{cache.capacity}")
        step = Step(cache, length, start, self.fused_decode_attention)
        h = self._hidden(tokens, step)  # [B, L, hidden], final norm applied
        if not all_logits:
            h = h[:, -1]
        logits = self._logits(h)
        if start is not None:
            step.finish()
        else:
            cache.advance(length)
        return logits

    @abc.abstractmethod
    def _hidden(self, tokens: torch.Tensor, step: Step) -> torch.Tensor:
        """``tokens [B, L]`` -> hidden states ``[B, L, hidden]`` after the final norm."""

    def _logits(self, h: torch.Tensor) -> torch.Tensor:
        return self.lm_head(h)


def rope_params(cfg: dict, layer_type: Optional[str] = None, legacy_theta_key: str = "rope_theta"
                ) -> tuple[float, Optional[dict]]:
    """``(theta, scaling)`` of a layer type from a config in either transformers form:
    ``rope_parameters`` (flat, or keyed by layer type) or legacy ``rope_theta`` + ``rope_scaling``."""
    params = cfg.get("rope_parameters")
    if isinstance(params, dict) and params:
        if layer_type is not None and isinstance(params.get(layer_type), dict):
            params = params[layer_type]
        elif any(isinstance(v, dict) for v in params.values()):
            params = next(v for v in params.values() if isinstance(v, dict))
        theta = float(params.get("rope_theta", cfg.get(legacy_theta_key, 10000.0)))
        rtype = params.get("rope_type", params.get("type", "default"))
        return theta, (dict(params) if rtype not in (None, "default") else None)
    theta = float(cfg.get(legacy_theta_key) or cfg.get("rope_theta") or 10000.0)
    scaling = cfg.get("rope_scaling")
    if isinstance(scaling, dict) and scaling.get("rope_type", scaling.get("type")) not in (None, "default"):
        return theta, dict(scaling)
    return theta, None


class WeightSource:
    """Named weights of a checkpoint, placed on the device on request. Missing names, and shapes other than the
    model's config implies (``shape``: a tuple of sizes, None for any), raise FormatError."""

    def __init__(self, ckpt: Checkpoint, opts: LoadOptions):
        self.ckpt = ckpt
        self.w = ckpt.weights
        self.opts = opts
        self.used: set[str] = set()

    def has(self, name: str) -> bool:
        return name in self.w

    def raw(self, name: str, shape: Optional[tuple] = None) -> Weight:
        if name not in self.w:
            raise FormatError(f"{self.ckpt.path}: tensor {name!r} is missing from the checkpoint")
        weight = self.w[name]
        if shape is not None:
            have = tuple(weight.shape)
            if len(have) != len(shape) or any(want is not None and h != want for h, want in zip(have, shape)):
                want = "(" + ", ".join("any" if s is None else str(s) for s in shape) + ")"
                raise FormatError(f"{self.ckpt.path}: tensor {name!r} has shape {have}; the model's config makes it "
                                  f"{want}")
        self.used.add(name)
        return weight

    def placed(self, name: str, shape: Optional[tuple] = None) -> Weight:
        """The weight ``name`` on the device, in the form the model runs it (:func:`place`)."""
        return place(self.raw(name, shape), self.opts)

    def linear(self, prefix: str, shape: Optional[tuple] = None, bias: Optional[bool] = None) -> Linear:
        """The projection ``prefix.weight`` (``shape`` ``(out, in)``) and its bias ``(out,)`` where present."""
        raw = self.raw(prefix + ".weight", shape)
        weight = place(raw, self.opts)
        b = None
        if bias or (bias is None and self.has(prefix + ".bias")):
            b = vector(self.raw(prefix + ".bias", (raw.shape[0],)), self.opts, self.opts.dtype)
        return Linear(weight, b)

    def gated_mlp(self, prefix: str, hidden: int) -> tuple[Linear, Linear, Linear]:
        """``(gate, up, down)`` of a gated MLP on ``hidden`` features: gate and up ``(inter, hidden)`` of one shape,
        down ``(hidden, inter)``."""
        gate = self.linear(f"{prefix}.gate_proj", (None, hidden))
        inter = self.w[f"{prefix}.gate_proj.weight"].shape[0]
        return gate, self.linear(f"{prefix}.up_proj", (inter, hidden)), self.linear(f"{prefix}.down_proj",
                                                                                     (hidden, inter))

    def vector(self, name: str, dtype: torch.dtype = torch.float32, size: Optional[int] = None) -> torch.Tensor:
        return vector(self.raw(name, None if size is None else (size,)), self.opts, dtype)

    def embedding(self, name: str, width: Optional[int] = None) -> Embedding:
        """The table ``name``, ``(rows, width)``."""
        return Embedding(place(self.raw(name, None if width is None else (None, width)), self.opts, repack=False),
                         self.opts.dtype)
