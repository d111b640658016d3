"""MoE kernels and plans: the expert matmuls (``quant.qmm.RoutedLaunch``), the weighted reduce, and the whole-step
plans (routing: ``routing.py``)."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ...kernels.launch import Launch, pdl_available
from ...runtime.memory import empty
from ..common import next_pow2
from ..ggml.kernel import aligned, rows_dequantizer, weight_spec
from ..ggml import formats
from ..quant import affine_idot, qmm
from ..quant import kernel as qkernel
from ..quant.gemv import AFFINE
from ..quant.qmm import ACT_CODES, RoutedLaunch, WeightSpec
from . import grouped, gguf_idot, gguf_mv, idot as moe_idot
from .routing import RoutePlan, RouterPlan
from .slots import H_LINK, ROUTE_LINK
from . import ref


@triton.jit(do_not_specialize=["n_rows"])
def _reduce_kernel(
    y_ptr,  # [T, TOPK, H] expert outputs (last dim contiguous; strides stride_yt, stride_yk)
    w_ptr,  # [T, TOPK] weights (strides stride_wt, stride_wk)
    out_ptr,  # [T, H] contiguous
    n_rows, H, stride_yt, stride_yk, stride_wt, stride_wk,
    TOPK: tl.constexpr, BH: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1) * BH + tl.arange(0, BH)
    ok = h < H
    acc = tl.zeros([BH], dtype=tl.float32)
    for j in range(TOPK):
        wj = tl.load(w_ptr + t * stride_wt + j * stride_wk).to(tl.float32)
        acc += wj * tl.load(y_ptr + t * stride_yt + j * stride_yk + h, mask=ok, other=0.0).to(tl.float32)
    tl.store(out_ptr + t * H + h, acc.to(out_ptr.dtype.element_ty), mask=ok)


class ReducePlan:
    def __init__(self, y, weights):
        self.out_shape = (*y.shape[:-2], y.shape[-1])
        self.empty = math.prod(self.out_shape) == 0
        if self.empty:
            return
        k, h = y.shape[-2:]
        t = math.prod(y.shape[:-2])
        self.t, self.k, self.h = t, k, h
        y3 = y.reshape(t, k, h)
        w2 = weights.reshape(t, k)
        bh = min(1024, next_pow2(h))
        self.ints = (t, h, y3.stride(0), y3.stride(1), w2.stride(0), w2.stride(1))
        self.launch = Launch(_reduce_kernel, (t, triton.cdiv(h, bh)), dict(TOPK=k, BH=bh), num_warps=4)

    def __call__(self, y, weights):
        out = empty(self.out_shape, dtype=y.dtype, device=y.device)
        self.launch(y.reshape(self.t, self.k, self.h), weights.reshape(self.t, self.k), out, *self.ints)
        return out


def _x_rows(x: torch.Tensor, t: int, k: int) -> torch.Tensor:
    if x.dim() == 2:
        return x.unsqueeze(1).expand(t, k, x.shape[-1]).reshape(t * k, x.shape[-1])
    return x.reshape(t * k, x.shape[-1])


def _finish(g, u, has_up, activation, t, k, dtype):
    out = ref.activate(g, u, activation) if has_up else g
    return out.reshape(t, k, -1).to(dtype)


def words(u):
    """A packed uint32 matrix viewed as the kernels' int32 words (anything else as it is)."""
    return u.view(torch.int32) if u is not None and u.dtype == torch.uint32 else u


def _x2d(x: torch.Tensor) -> torch.Tensor:
    x2 = x.reshape(-1, x.shape[-1])
    return x2 if x2.stride(-1) == 1 else x2.contiguous()


class MoeQmmPlan:
    def __init__(self, x, ids, w, scales, biases, has_up, group_size, bits, activation, t, k, n, contiguous=False,
                 mix=False):
        self.has_up, self.group_size, self.bits, self.activation = has_up, group_size, bits, activation
        self.t, self.k, self.n = t, k, n
        self.out_shape = (t, n) if mix else (t, k, n)
        self.empty = t * k * n == 0
        self.kind = "routed"
        if self.empty:
            return
        kf = x.shape[-1]
        x_div = k if x.dim() == 2 else 1
        fast = contiguous and qmm.CONFIG_OVERRIDE is None
        act = ACT_CODES[activation] if has_up else None
        if fast and has_up and w.shape[0] == 1 and t * k == 1 \
                and affine_idot.supports(bits, group_size, True, x.dtype, x.dtype, 1, kf, w.numel(), pairs=True):
            # one expert and one row: a dense gate/up pair, the integer-dot mat-vec
            self.launch = affine_idot.AffineIdotLaunch(n, kf, group_size, x.dtype, x.device, act=act)
            self.kind = "dense_glu"
            return
        if fast and moe_idot.supports(bits, group_size, x.dtype, kf, t * k, w.numel()):
            self.launch = moe_idot.MoeIdotLaunch(t, k, n, kf, w.shape[0], group_size, x_div, x.dtype, x.device,
                                                 act=act, mix=mix)
            self.kind = "idot_mix" if self.launch.mixes else "idot"
            if not self.launch.mixes:
                self.out_shape = (t, k, n)  # the caller mixes the slots (x shared by a token's slots)
            return
        self.out_shape = (t, k, n)
        x2 = _x2d(x)
        strides = (x2.stride(0), *qmm.stack_strides(w, scales))
        launch = grouped.grouped_launch(AFFINE.value, n, kf, t * k, w.shape[0], x_div, x.dtype, strides, x.device,
                                        qkernel.rows_dequantizer(kf, group_size, bits), act, bits=bits,
                                        group_size=group_size, scale_dtype=scales.dtype) if fast else None
        if launch is not None:
            self.launch, self.kind = launch, "grouped"
            return
        spec = WeightSpec(0, 0, bits, group_size, True)
        self.launch = RoutedLaunch(spec, n, kf, t * k, w.shape[0], x_div, False, has_up, ACT_CODES.get(activation, 0),
                                   x.dtype, x.dtype == torch.float32, strides, x.device)

    def reference(self, x, ids, w, scales, biases, w_up, scales_up, biases_up):
        compute = torch.float64 if x.dtype == torch.float64 else torch.float32
        xr = _x_rows(x, self.t, self.k)
        flat = ids.reshape(-1)
        g = ref.affine_rows(xr, flat, w, scales, biases, self.group_size, self.bits, compute)
        u = ref.affine_rows(xr, flat, w_up, scales_up, biases_up, self.group_size, self.bits, compute) \
            if self.has_up else None
        return _finish(g, u, self.has_up, self.activation, self.t, self.k, x.dtype)

    def __call__(self, x, ids, w, scales, biases, w_up, scales_up, biases_up, mix=None):
        """The expert matmul, ``[T, top_k, N]``, or ``[T, N]`` when the launch mixed the slots with ``mix``."""
        if self.kind == "dense_glu":  # ids can only be 0 (one expert)
            return self.launch(_x2d(x), words(w[0]), scales[0], biases[0], words(w_up[0]), scales_up[0],
                               biases_up[0]).view(self.out_shape)
        if self.kind == "grouped":
            up = None if w_up is None else (words(w_up), scales_up, biases_up)
            return self.launch(_x2d(x), ids.reshape(-1).contiguous(), (words(w), scales, biases), up).view(self.out_shape)
        if self.kind.startswith("idot"):
            mix = mix.reshape(-1).contiguous() if self.kind == "idot_mix" else None
            out = self.launch(_x2d(x), ids.reshape(-1).contiguous(), words(w), scales, biases, words(w_up), scales_up, biases_up,
                              mix=mix)
            return out.view(self.out_shape)
        w, scales, biases, w_up, scales_up, biases_up = (
            None if u is None else u.contiguous() for u in (w, scales, biases, w_up, scales_up, biases_up))
        out = self.launch(_x2d(x), ids.reshape(-1).contiguous(), words(w), scales, biases, words(w_up), scales_up,
                          biases_up)
        return out.view(self.out_shape)


def route_plan(x, logits, router, top_k, scoring, renormalize, bias, pdl):
    """The routing launch of a whole-step plan: from ``logits`` or, when they are None, from ``x @ router.T``."""
    hidden = x.shape[-1]
    if logits is None:
        return RouterPlan(x.reshape(-1, hidden), router, top_k, scoring, renormalize, bias, pdl)
    return RoutePlan(logits.reshape(-1, logits.shape[-1]), top_k, scoring, renormalize, bias, pdl)


class MoeFfnPlan:
    """``moe_ffn``. Decode-sized calls on 4-bit experts with bf16/fp16 x and contiguous weights (``fused``):
    the route kernel, then the routed gate/up pair and the mixed down projection chained by programmatic
    dependent launch on sm_90+ (``MLX_NATIVE_PDL``; ``ops/moe/idot.py``). Otherwise ``fused`` is False and
    the caller runs moe_route and the two moe_qmm calls."""

    def __init__(self, x, logits, router, top_k, n_experts, hidden, inter, group_size, bits, activation, scoring,
                 renormalize, bias, contiguous):
        self.empty = x.numel() == 0
        self.fused = False
        if self.empty:
            return
        t = x.numel() // hidden
        n_words = n_experts * inter * hidden * bits // 32
        if not (contiguous and qmm.CONFIG_OVERRIDE is None
                and moe_idot.supports(bits, group_size, x.dtype, hidden, t * top_k, n_words)
                and moe_idot.supports(bits, group_size, x.dtype, inter, t * top_k, n_words)):
            return
        pdl = pdl_available(x.device)
        self.route = route_plan(x, logits, router, top_k, scoring, renormalize, bias, pdl)
        self.glu = moe_idot.MoeIdotLaunch(t, top_k, inter, hidden, n_experts, group_size, top_k, x.dtype, x.device,
                                          act=ACT_CODES[activation], pdl=pdl)
        self.mix = moe_idot.MoeIdotLaunch(t, top_k, hidden, inter, n_experts, group_size, 1, x.dtype, x.device,
                                          mix=True, pdl=pdl)
        self.fused = True

    def run_fused(self, x2, routing, bias, weights):
        """``x2 [t, hidden]``, ``routing`` ``(logits [t, E],)`` or ``(x2, router [E, hidden])``, ``weights`` the
        nine gate/up/down tensors -> ``[t, hidden]``."""
        wg, sg, bg, wu, su, bu, wd, sd, bd = map(words, weights)
        ids, w = self.route(*routing, bias)
        ids = ids.reshape(-1)
        h = self.glu(x2, ids, wg, sg, bg, wu, su, bu)
        return self.mix(h, ids, wd, sd, bd, mix=w.reshape(-1))


def routed_decode(type_id: int, x_dtype: torch.dtype, k: int, slots: int, nbytes: int):
    """``(launch class, kind)`` of the routed decode kernel that takes ``slots`` rows of x against GGUF experts of
    type ``type_id``, rows of ``k`` values, ``nbytes`` in all (``gguf_idot``: "idot", ``gguf_mv``: "routed mv"), or
    None."""
    for supports, launch, kind in ((gguf_idot.supports, gguf_idot.MoeGgmlIdotLaunch, "idot"),
                                   (gguf_mv.supports, gguf_mv.MoeGgufMvLaunch, "routed mv")):
        if supports(type_id, x_dtype, k, slots, nbytes):
            return launch, kind
    return None


class MoeGgmlFfnPlan:
    """``moe_ggml_ffn``. Decode-sized calls whose gate/up pair (one type) and down projection the routed decode
    kernels take (:func:`routed_decode`), with the down projection mixing the slots (by token on Q4_K / Q5_K rows of
    one loop step, else by arrival with counters made now: not a plan built during a CUDA-graph capture), are
    ``fused``: the route kernel, the gate/up pair and the mixed down projection chained by programmatic dependent
    launch on sm_90+ (``slots.ROUTE_LINK`` / ``H_LINK``). Otherwise the caller runs moe_route and moe_ggml_matmul.
    ``dims``: ``(experts, hidden, inter)``."""

    def __init__(self, x, logits, router, top_k, types, n_experts, hidden, inter, activation, scoring, renormalize,
                 bias, nbytes):
        self.dims = (n_experts, hidden, inter)
        self.empty = x.numel() == 0
        self.fused = False
        gate_t, up_t, down_t = types
        if self.empty or gate_t != up_t:
            return
        t = x.numel() // hidden
        glu = routed_decode(gate_t, x.dtype, hidden, t * top_k, max(nbytes[:2]))
        down = routed_decode(down_t, x.dtype, inter, t * top_k, nbytes[2])
        if glu is None or down is None:
            return
        pdl = pdl_available(x.device)
        self.route = route_plan(x, logits, router, top_k, scoring, renormalize, bias, pdl)
        self.glu = glu[0](gate_t, t * top_k, inter, hidden, n_experts, top_k, x.dtype, x.device,
                          act=ACT_CODES[activation], link=ROUTE_LINK.value if pdl else 0)
        self.down = down[0](down_t, t * top_k, hidden, inter, n_experts, 1, x.dtype, x.device, mix=True, top_k=top_k,
                            link=H_LINK.value if pdl else 0)
        self.fused = self.down.mix.mixes

    def run_fused(self, x2, routing, bias, raws):
        """``x2 [t, hidden]``, ``routing`` as :meth:`MoeFfnPlan.run_fused`, ``raws`` the gate / up / down bytes ->
        ``[t, hidden]``."""
        g, u, d = (aligned(r.reshape(-1)) for r in raws)
        ids, w = self.route(*routing, bias)
        ids = ids.reshape(-1)
        h = self.glu(x2, ids, g, u)
        return self.down(h, ids, d, None, w.reshape(-1))


class MoeGgmlPlan:
    """``moe_ggml_matmul``. ``mix``: routing weights will be given; the decode kernels (``idot``, ``routed mv``) mix
    the slots in their launch (``mixed``, output ``[tokens, n]``), the others return ``[tokens, k, n]`` for the
    caller's weighted reduce."""

    def __init__(self, x, ids, raw, t, dims, has_up, activation, tt, k, mix=False):
        self.t, self.has_up, self.activation = t, has_up, activation
        self.n_experts, self.n, self.kf = dims
        self.tokens, self.k = tt, k
        self.out_shape = (tt, k, self.n)
        self.mixed = False
        self.empty = tt * k * self.n == 0
        if self.empty:
            return
        rb = formats.row_bytes(t, self.kf)
        x2 = _x2d(x)
        strides = (x2.stride(0), self.n * rb, rb, 0, 0)
        act = ACT_CODES[activation] if has_up else None
        x_div = k if x.dim() == 2 else 1
        decode = routed_decode(t.id, x.dtype, self.kf, tt * k, raw.numel())
        if decode is not None:
            launch, self.kind = decode
            self.launch = launch(t.id, tt * k, self.n, self.kf, self.n_experts, x_div, x.dtype, x.device, act, mix=mix,
                                 top_k=k)
            self.mixed = self.launch.mix.mixes
            if self.mixed:
                self.out_shape = (tt, self.n)
            return
        self.kind = "tiled"
        launch = grouped.grouped_launch(t.id, self.n, self.kf, tt * k, self.n_experts, x_div, x.dtype, strides,
                                        x.device, rows_dequantizer(t, self.kf), act)
        if launch is not None:
            self.launch, self.kind = launch, "grouped"
            return
        self.launch = RoutedLaunch(weight_spec(t), self.n, self.kf, tt * k, self.n_experts, x_div, False, has_up,
                                   ACT_CODES.get(activation, 0), x.dtype, x.dtype == torch.float32, strides, x.device)

    def reference(self, x, ids, raw, raw_up):
        compute = torch.float64 if x.dtype == torch.float64 else torch.float32
        xr = _x_rows(x, self.tokens, self.k)
        flat = ids.reshape(-1)
        g = ref.ggml_rows(xr, flat, raw, self.t, self.n, compute)
        u = ref.ggml_rows(xr, flat, raw_up, self.t, self.n, compute) if self.has_up else None
        return _finish(g, u, self.has_up, self.activation, self.tokens, self.k, x.dtype)

    def __call__(self, x, ids, raw, raw_up, mix=None):
        r = aligned(raw.reshape(-1))
        r2 = aligned(raw_up.reshape(-1)) if raw_up is not None else None
        if self.kind == "grouped":
            return self.launch(_x2d(x), ids.reshape(-1).contiguous(), (r,), None if r2 is None else (r2,)).view(
                self.out_shape)
        if self.kind in ("idot", "routed mv"):
            mix = mix.reshape(-1).contiguous() if self.mixed else None
            return self.launch(_x2d(x), ids.reshape(-1).contiguous(), r, r2, mix).view(self.out_shape)
        out = self.launch(_x2d(x), ids.reshape(-1).contiguous(), r, r, r, r2, r2, r2)
        return out.view(self.out_shape)
