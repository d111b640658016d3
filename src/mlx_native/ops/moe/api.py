"""Mixture-of-experts ops: ``moe_route`` (from logits), ``moe_router`` (the router projection and the routing in
one launch), ``moe_qmm`` (MLX affine experts), ``moe_ggml_matmul`` (GGUF experts), ``moe_weighted_reduce``, and
``moe_ffn`` / ``moe_ggml_ffn`` (the whole step).

A MoE FFN step with these ops (Qwen3-MoE, Qwen3.5/3.6-A3B, Gemma-style)::

    ids, w = mn.moe_route(router_logits, 8)                        # [T, 8] int32, float32
    h = mn.moe_qmm(x, ids, gate_q, gate_s, gate_b,                 # [T, 8, I]: act(x Wg^T) * (x Wu^T)
                   w_up=up_q, scales_up=up_s, biases_up=up_b)
    y = mn.moe_qmm(h, ids, down_q, down_s, down_b)                 # [T, 8, H] (x per slot)
    out = mn.moe_weighted_reduce(y, w)                             # [T, H]

or in one call, ``out = mn.moe_ffn(x, router_logits, 8, gate, up, down)``, or ``mn.moe_ffn(x, None, 8, gate, up,
down, router_weight=router_w)`` with the logits computed in the routing launch (GGUF experts: ``mn.moe_ggml_ffn``
with ``(raw, ggml_type)`` pairs; at decode sizes the three launches overlap by programmatic dependent launch).

A few routed rows (decode) run one mat-vec program set per row (``ops/moe/idot.py`` for MLX affine 4-bit,
``ops/moe/gguf_idot.py`` for GGUF Q4_K / Q5_K: integer-dot kernels; ``ops/moe/gguf_mv.py`` for GGUF Q6_K / Q8_0:
the streamed one-row loops; the tiled routed kernel for the other formats).
From 17 rows (prefill) the rows are sorted by expert on the GPU (no host sync, static sizes) into blocks of one
expert's rows, and each block's rows meet its expert's weights on tensor cores (``ops/moe/grouped.py``).

No ``from __future__ import annotations`` here: torch.library reads the annotations.
"""

from typing import Optional, Sequence

import torch

from ...errors import FormatError, InvalidArgumentError
from ...runtime import checks
from ...runtime.dispatch import use_triton
from ...runtime.library import register_op
from ...runtime.memory import empty
from ...runtime.plans import PlanCache, tensor_key
from ..ggml import formats
from ..activations.api import gated_mul
from ..ggml.api import RAW_DTYPES, TypeArg, _shape_list, check_raw
from ..quant.api import check_format, check_packed
from . import ref
from .ref import ACTIVATIONS

SCORINGS = ("softmax", "sigmoid")
ID_DTYPES = (torch.int32, torch.int64)


# --------------------------------------------------------------------------- moe_route

def _check_choice(op: str, e: int, top_k, scoring, bias, ref_name: str, ref: torch.Tensor) -> None:
    """The routing arguments of any routing op, for ``e`` experts (``ref``: a tensor on the op's device)."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= min(e, 64):
        raise InvalidArgumentError(
            f"{op}: top_k must be an int in [1, min(n_experts, 64)] = [1, {min(e, 64)}], got {top_k!r}")
    if scoring not in SCORINGS:
        raise InvalidArgumentError(f"{op}: scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
    if bias is not None:
        checks.check_tensor(op, "selection_bias", bias)
        checks.check_same_device(op, ref_name, ref, selection_bias=bias)
        checks.check_vector(op, "selection_bias", bias, e, "the number of experts")


def _validate_route(logits, top_k, scoring, renormalize, bias, op="moe_route"):
    checks.check_tensor(op, "router_logits", logits, checks.FLOAT_DTYPES + (torch.float64,))
    checks.check_last_dim_contiguous(op, "router_logits", logits)
    _check_choice(op, logits.shape[-1], top_k, scoring, bias, "router_logits", logits)


def _check_router(op: str, x: torch.Tensor, router: torch.Tensor) -> int:
    """``router`` is the ``[E, hidden]`` float weight of x's router -> E."""
    checks.check_tensor(op, "router_weight", router, checks.FLOAT_DTYPES + (torch.float64,))
    if router.dim() != 2 or router.shape[1] != x.shape[-1]:
        raise InvalidArgumentError(f"{op}: router_weight must be [n_experts, hidden={x.shape[-1]}] (hidden from x), "
                                   f"got shape {tuple(router.shape)}")
    checks.check_last_dim_contiguous(op, "router_weight", router)
    checks.check_same_device(op, "x", x, router_weight=router)
    return router.shape[0]


def _route_plan(logits, top_k, scoring, renormalize, bias):
    _validate_route(logits, top_k, scoring, renormalize, bias)
    from .kernel import RoutePlan

    return RoutePlan(logits, top_k, scoring, renormalize, bias)


_ROUTE_PLANS = PlanCache(_route_plan)


def _fake_route(logits, top_k, scoring, renormalize, bias):
    _validate_route(logits, top_k, scoring, renormalize, bias)
    shape = (*logits.shape[:-1], top_k)
    return logits.new_empty(shape, dtype=torch.int32), logits.new_empty(shape, dtype=torch.float32)


@register_op("moe_route", fake=_fake_route)
def _moe_route(logits: torch.Tensor, top_k: int, scoring: str, renormalize: bool,
               bias: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    plan = _ROUTE_PLANS.get((tensor_key(logits), top_k, scoring, renormalize, tensor_key(bias)), logits, top_k,
                            scoring, renormalize, bias)
    if plan.empty:
        shape = (*logits.shape[:-1], top_k)
        return (empty(shape, dtype=torch.int32, device=logits.device),
                empty(shape, dtype=torch.float32, device=logits.device))
    if use_triton("moe_route", logits):
        return plan(logits, bias)
    return ref.route(logits, top_k, scoring, renormalize, bias)


def moe_route(router_logits: torch.Tensor, top_k: int, *, scoring: str = "softmax", renormalize: bool = True,
              selection_bias: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Choose ``top_k`` experts per token and their mixing weights, on the device.

    ``scores = softmax(logits)`` (or ``sigmoid(logits)``, DeepSeek-V3/GLM style); the
    experts with the largest ``scores + selection_bias`` are chosen (the bias only
    steers the choice, as DeepSeek-V3's correction bias); their weights are their
    scores, divided by their sum when ``renormalize`` (Qwen3 ``norm_topk_prob``).
    Ties go to the lower expert id. Per-expert output scales (Gemma) are the
    caller's: multiply ``weights`` by ``scale[expert_ids]``.

    Args:
        router_logits: ``[..., E]`` float (E experts, 1 <= top_k <= min(E, 64)).
        top_k: experts per token.
        scoring: "softmax" or "sigmoid".
        renormalize: normalize the chosen weights to sum to 1.
        selection_bias: optional ``[E]`` added to the scores for the choice only.

    Returns:
        ``(expert_ids, weights)``: ``[..., top_k]`` int32 sorted by decreasing score, and
        float32 weights.

    Raises:
        InvalidArgumentError, UnsupportedDTypeError.

    Example:
        >>> ids, w = mn.moe_route(h @ router_w.T, 8)
    """
    return _moe_route(router_logits, top_k, scoring, bool(renormalize), selection_bias)


# --------------------------------------------------------------------------- moe_router

def _validate_router(x, router, top_k, scoring, renormalize, bias):
    op = "moe_router"
    checks.check_tensor(op, "x", x, checks.FLOAT_DTYPES + (torch.float64,))
    checks.check_last_dim_contiguous(op, "x", x)
    e = _check_router(op, x, router)
    _check_choice(op, e, top_k, scoring, bias, "x", x)


def _router_plan(x, router, top_k, scoring, renormalize, bias):
    _validate_router(x, router, top_k, scoring, renormalize, bias)
    from .routing import RouterPlan

    return RouterPlan(x.reshape(-1, x.shape[-1]), router, top_k, scoring, renormalize, bias)


_ROUTER_PLANS = PlanCache(_router_plan)


def _fake_router(x, router, top_k, scoring, renormalize, bias):
    _validate_router(x, router, top_k, scoring, renormalize, bias)
    shape = (*x.shape[:-1], top_k)
    return x.new_empty(shape, dtype=torch.int32), x.new_empty(shape, dtype=torch.float32)


@register_op("moe_router", fake=_fake_router)
def _moe_router(x: torch.Tensor, router: torch.Tensor, top_k: int, scoring: str, renormalize: bool,
                bias: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    shape = (*x.shape[:-1], top_k)
    if x.shape[:-1].numel() == 0:
        _validate_router(x, router, top_k, scoring, renormalize, bias)
        return (empty(shape, dtype=torch.int32, device=x.device),
                empty(shape, dtype=torch.float32, device=x.device))
    plan = _ROUTER_PLANS.get((tensor_key(x), tensor_key(router), top_k, scoring, renormalize, tensor_key(bias)), x,
                             router, top_k, scoring, renormalize, bias)
    if use_triton("moe_router", x):
        ids, w = plan(x.reshape(-1, x.shape[-1]), router, bias)
        return ids.view(shape), w.view(shape)
    return ref.route(ref.router_logits(x, router), top_k, scoring, renormalize, bias)


def moe_router(x: torch.Tensor, router_weight: torch.Tensor, top_k: int, *, scoring: str = "softmax",
               renormalize: bool = True, selection_bias: Optional[torch.Tensor] = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """The router projection and :func:`moe_route` in one: ``moe_route(x @ router_weight.T, top_k, ...)`` with the
    logits in fp32 (never rounded to x's dtype).

    On CUDA, up to 64 rows (decode) run one launch: the experts spread over the SMs, each program reads its
    experts' rows of the router once and dots them with a group of up to 8 rows (exact products, fp32 sums), and
    the last program of a group to finish ranks its logits (cuBLAS runs a 128 x 2048 router as a mat-vec on a few
    SMs). More rows: one matmul with an fp32 output, then the routing launch.

    Args:
        x: ``[..., hidden]`` float rows (tokens).
        router_weight: ``[E, hidden]`` float, the router's weight (``mlp.gate.weight``; a quantized router
            dequantized once).
        top_k, scoring, renormalize, selection_bias: as :func:`moe_route`.

    Returns:
        ``(expert_ids, weights)``: ``[..., top_k]`` int32 and float32, as :func:`moe_route`.

    Raises:
        InvalidArgumentError, UnsupportedDTypeError, DeviceMismatchError (before any launch).

    Example:
        >>> ids, w = mn.moe_router(h, router_w, 8)
    """
    return _moe_router(x, router_weight, top_k, scoring, bool(renormalize), selection_bias)


# --------------------------------------------------------------------------- shared checks

def _check_rows(op: str, x: torch.Tensor, ids: torch.Tensor, k_features: int) -> tuple[int, int]:
    """``ids [T, k]``; ``x [T, K]`` (shared by the k slots) or ``[T, k, K]`` (one per slot)."""
    checks.check_tensor(op, "x", x, min_ndim=2)
    checks.check_tensor(op, "expert_ids", ids, ID_DTYPES, min_ndim=2)
    checks.check_same_device(op, "x", x, expert_ids=ids)
    checks.check_last_dim_contiguous(op, "x", x)
    if ids.dim() != 2:
        raise InvalidArgumentError(f"{op}: expert_ids must be [tokens, top_k], got shape {tuple(ids.shape)}")
    t, k = ids.shape
    if x.dim() == 2:
        ok = x.shape[0] == t
    elif x.dim() == 3:
        ok = x.shape[:2] == ids.shape
    else:
        ok = False
    if not ok:
        raise InvalidArgumentError(
            f"{op}: x has shape {tuple(x.shape)}; expected [{t}, K] or [{t}, {k}, K] for expert_ids {tuple(ids.shape)}")
    if x.shape[-1] != k_features:
        raise InvalidArgumentError(f"{op}: x has {x.shape[-1]} features in its last dim but the experts take K={k_features}")
    return t, k


def _check_activation(op: str, activation: str) -> None:
    if activation not in ACTIVATIONS:
        raise InvalidArgumentError(f"{op}: activation must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")


# --------------------------------------------------------------------------- moe_qmm

def _validate_qmm(x, ids, w, scales, biases, w_up, scales_up, biases_up, group_size, bits, activation, mix):
    op = "moe_qmm"
    check_format(op, group_size, bits)
    k_feat = check_packed(op, w, scales, biases, group_size, bits)
    if w.dim() != 3:
        raise InvalidArgumentError(f"{op}: w must be [experts, N, K * bits / 32], got shape {tuple(w.shape)}")
    t, k = _check_rows(op, x, ids, k_feat)
    checks.check_same_device(op, "x", x, w=w)
    has_up = w_up is not None
    if has_up != (scales_up is not None) or has_up != (biases_up is not None):
        raise InvalidArgumentError(f"{op}: w_up, scales_up and biases_up must be given together")
    if has_up:
        check_packed(op, w_up, scales_up, biases_up, group_size, bits)
        for name, a, b in (("w_up", w_up, w), ("scales_up", scales_up, scales), ("biases_up", biases_up, biases)):
            if a.shape != b.shape:
                raise InvalidArgumentError(f"{op}: {name} has shape {tuple(a.shape)}, expected {tuple(b.shape)}")
        checks.check_same_device(op, "x", x, w_up=w_up)
        _check_activation(op, activation)
    _check_mix(op, x, ids, mix, has_up, "w_up")
    return t, k, w.shape[1]


def _check_mix(op: str, x: torch.Tensor, ids: torch.Tensor, mix: Optional[torch.Tensor], has_up: bool, up_name: str):
    """``topk_weights`` (``mix``): not with the gate/up pair, on x's device, of expert_ids' shape."""
    if mix is None:
        return
    if has_up:
        raise InvalidArgumentError(f"{op}: topk_weights mixes the down projection's slots; it cannot be given "
                                   f"with {up_name} (the gate/up pair)")
    checks.check_tensor(op, "topk_weights", mix)
    checks.check_same_device(op, "x", x, topk_weights=mix)
    if mix.shape != ids.shape:
        raise InvalidArgumentError(
            f"{op}: topk_weights has shape {tuple(mix.shape)}, expected {tuple(ids.shape)} (expert_ids' shape)")


def _moe_qmm_plan(x, ids, w, scales, biases, w_up, scales_up, biases_up, group_size, bits, activation, mix):
    t, k, n = _validate_qmm(x, ids, w, scales, biases, w_up, scales_up, biases_up, group_size, bits, activation, mix)
    from .kernel import MoeQmmPlan

    contiguous = all(u.is_contiguous() for u in (w, scales, biases, w_up, scales_up, biases_up) if u is not None)
    return MoeQmmPlan(x, ids, w, scales, biases, w_up is not None, group_size, bits, activation, t, k, n,
                      contiguous=contiguous, mix=mix is not None)


_QMM_PLANS = PlanCache(_moe_qmm_plan)


def _fake_moe_qmm(x, ids, w, scales, biases, w_up, scales_up, biases_up, group_size, bits, activation, mix):
    t, k, n = _validate_qmm(x, ids, w, scales, biases, w_up, scales_up, biases_up, group_size, bits, activation, mix)
    return x.new_empty((t, n) if mix is not None else (t, k, n))


@register_op("moe_qmm", fake=_fake_moe_qmm)
def _moe_qmm(x: torch.Tensor, ids: torch.Tensor, w: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor,
             w_up: Optional[torch.Tensor], scales_up: Optional[torch.Tensor], biases_up: Optional[torch.Tensor],
             group_size: int, bits: int, activation: str, mix: Optional[torch.Tensor]) -> torch.Tensor:
    key = (tensor_key(x), tensor_key(ids), tensor_key(w), tensor_key(scales), tensor_key(biases), tensor_key(w_up),
           tensor_key(scales_up), tensor_key(biases_up), group_size, bits, activation, tensor_key(mix))
    plan = _QMM_PLANS.get(key, x, ids, w, scales, biases, w_up, scales_up, biases_up, group_size, bits, activation,
                          mix)
    checks.check_index_range("moe_qmm", "expert_ids", ids, w.shape[0], "experts")
    if plan.empty:
        return empty(plan.out_shape, dtype=x.dtype, device=x.device)
    if use_triton("moe_qmm", x):
        out = plan(x, ids, w, scales, biases, w_up, scales_up, biases_up, mix)
    else:
        out = plan.reference(x, ids, w, scales, biases, w_up, scales_up, biases_up)
    return _mixed(out, mix)


def _mixed(out: torch.Tensor, mix: Optional[torch.Tensor]) -> torch.Tensor:
    """A routed op's result with ``topk_weights``: ``[T, N]`` as the launch mixed it, else ``[T, top_k, N]`` reduced."""
    return _moe_weighted_reduce(out, mix) if mix is not None and out.dim() == 3 else out


def moe_qmm(x: torch.Tensor, expert_ids: torch.Tensor, w: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor,
            *, group_size: int = 64, bits: int = 4, w_up: Optional[torch.Tensor] = None,
            scales_up: Optional[torch.Tensor] = None, biases_up: Optional[torch.Tensor] = None,
            activation: str = "silu", topk_weights: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Expert-routed quantized matmul on MLX-affine experts stacked as ``[E, N, K*bits/32]``.

    ``out[t, j] = x[t] @ W[expert_ids[t, j]].T`` (``x [T, K]``, shared by the slots) or
    ``x[t, j] @ W[...].T`` (``x [T, k, K]``, e.g. the down projection). With ``w_up``
    (the up projection, same shapes as ``w``, the gate) the gate/up pair is fused:
    ``act(x Wg^T) * (x Wu^T)`` in fp32, one rounding (``activation`` "silu": SwiGLU;
    "gelu_tanh": GeGLU as Gemma).

    Args:
        x: ``[T, K]`` or ``[T, top_k, K]`` float32/float16/bfloat16.
        expert_ids: ``[T, top_k]`` int32/int64 in ``[0, E)`` (as :func:`moe_route` returns).
        w, scales, biases: stacked experts as mlx-lm's SwitchLinear holds them
            (``[E, N, K*bits/32]`` uint32, ``[E, N, K/group_size]``).
        group_size, bits: the quantization.
        w_up, scales_up, biases_up: optional up projection for the fused gate/up.
        activation: "silu" or "gelu_tanh" (used with ``w_up``).
        topk_weights: optional ``[T, top_k]`` routing weights (as :func:`moe_route` returns; not with ``w_up``):
            the slots are mixed, ``out[t] = sum_j topk_weights[t, j] * x[t, j] @ W[expert_ids[t, j]].T`` in
            fp32, i.e. the down projection and :func:`moe_weighted_reduce` in one launch.

    Returns:
        ``[T, top_k, N]`` in x's dtype (``[T, N]`` with ``topk_weights``).

    Raises:
        InvalidArgumentError (shapes, ids out of range on CPU), UnsupportedError, UnsupportedDTypeError.
    """
    return _moe_qmm(x, expert_ids, w, scales, biases, w_up, scales_up, biases_up, int(group_size), int(bits),
                    activation, topk_weights)


# --------------------------------------------------------------------------- moe_ffn

_FFN_PARTS = ("gate", "up", "down")


def _check_step(op: str, x, logits, router, top_k, scoring, renormalize, bias, activation) -> int:
    """The checks of a whole MoE FFN step (``moe_ffn``, ``moe_ggml_ffn``) on x, the routing (``router_logits`` or
    ``router_weight``: one of them) and the activation -> the number of experts."""
    checks.check_tensor(op, "x", x, min_ndim=1)
    checks.check_last_dim_contiguous(op, "x", x)
    if (logits is None) == (router is None):
        raise InvalidArgumentError(f"{op}: give router_logits or router_weight, not "
                                   f"{'both' if router is not None else 'neither'}")
    if router is not None:
        e = _check_router(op, x, router)
        _check_choice(op, e, top_k, scoring, bias, "x", x)
    else:
        _validate_route(logits, top_k, scoring, renormalize, bias, op)
        checks.check_same_device(op, "x", x, router_logits=logits)
        if logits.shape[:-1] != x.shape[:-1]:
            raise InvalidArgumentError(f"{op}: router_logits has shape {tuple(logits.shape)}; expected "
                                       f"[{', '.join(map(str, x.shape[:-1]))}, E] for x {tuple(x.shape)}")
        e = logits.shape[-1]
    _check_activation(op, activation)
    return e


def _routing_inputs(x2, logits, router) -> tuple:
    """What a whole-step plan's routing launch reads: ``(logits [T, E],)`` or ``(x2, router)``."""
    return (x2, router) if router is not None else (logits.reshape(-1, logits.shape[-1]),)


def _step_routing(x2, logits, router, top_k, scoring, renormalize, bias):
    """``(ids, weights)`` of a whole step's rows ``x2 [T, hidden]`` when it runs the ops one by one."""
    if router is not None:
        return _moe_router(x2, router, top_k, scoring, renormalize, bias)
    return _moe_route(logits.reshape(-1, logits.shape[-1]), top_k, scoring, renormalize, bias)


def _validate_ffn(x, logits, top_k, wg, sg, bg, wu, su, bu, wd, sd, bd, group_size, bits, activation, scoring,
                  renormalize, bias, router):
    op = "moe_ffn"
    e = _check_step(op, x, logits, router, top_k, scoring, renormalize, bias, activation)
    check_format(op, group_size, bits)
    hidden = x.shape[-1]
    widths = []
    for name, (w, s, b) in zip(_FFN_PARTS, ((wg, sg, bg), (wu, su, bu), (wd, sd, bd))):
        widths.append(check_packed(f"{op}: {name}", w, s, b, group_size, bits))
        checks.check_same_device(op, "x", x, **{name: w})
        if w.dim() != 3 or w.shape[0] != e:
            raise InvalidArgumentError(f"{op}: {name} must be [experts={e}, N, K * bits / 32] (E from the router), "
                                       f"got shape {tuple(w.shape)}")
    inter = wg.shape[1]
    want = {"gate": (inter, hidden), "up": (inter, hidden), "down": (hidden, inter)}
    for name, w, width in zip(_FFN_PARTS, (wg, wu, wd), widths):
        if (w.shape[1], width) != want[name]:
            raise InvalidArgumentError(
                f"{op}: {name} holds {w.shape[1]} x {width} matrices; expected {want[name][0]} x {want[name][1]} "
                f"(hidden {hidden} from x, intermediate {inter} from gate)")
    return e, hidden, inter


def _moe_ffn_plan(x, logits, top_k, wg, sg, bg, wu, su, bu, wd, sd, bd, group_size, bits, activation, scoring,
                  renormalize, bias, router):
    e, hidden, inter = _validate_ffn(x, logits, top_k, wg, sg, bg, wu, su, bu, wd, sd, bd, group_size, bits,
                                     activation, scoring, renormalize, bias, router)
    from .kernel import MoeFfnPlan

    contiguous = all(u.is_contiguous() for u in (wg, sg, bg, wu, su, bu, wd, sd, bd))
    return MoeFfnPlan(x, logits, router, top_k, e, hidden, inter, group_size, bits, activation, scoring,
                      renormalize, bias, contiguous)


_FFN_PLANS = PlanCache(_moe_ffn_plan)


def _fake_moe_ffn(x, logits, top_k, wg, sg, bg, wu, su, bu, wd, sd, bd, group_size, bits, activation, scoring,
                  renormalize, bias, router):
    _validate_ffn(x, logits, top_k, wg, sg, bg, wu, su, bu, wd, sd, bd, group_size, bits, activation, scoring,
                  renormalize, bias, router)
    return x.new_empty(x.shape)


@register_op("moe_ffn", fake=_fake_moe_ffn)
def _moe_ffn(x: torch.Tensor, logits: Optional[torch.Tensor], top_k: int, wg: torch.Tensor, sg: torch.Tensor,
             bg: torch.Tensor, wu: torch.Tensor, su: torch.Tensor, bu: torch.Tensor, wd: torch.Tensor,
             sd: torch.Tensor, bd: torch.Tensor, group_size: int, bits: int, activation: str, scoring: str,
             renormalize: bool, bias: Optional[torch.Tensor], router: Optional[torch.Tensor]) -> torch.Tensor:
    weights = (wg, sg, bg, wu, su, bu, wd, sd, bd)
    key = (tensor_key(x), tensor_key(logits), top_k, *map(tensor_key, weights), group_size, bits, activation,
           scoring, renormalize, tensor_key(bias), tensor_key(router))
    plan = _FFN_PLANS.get(key, x, logits, top_k, *weights, group_size, bits, activation, scoring, renormalize,
                          bias, router)
    if plan.empty:
        return empty(x.shape, dtype=x.dtype, device=x.device)
    x2 = x.reshape(-1, x.shape[-1])
    if plan.fused and use_triton("moe_ffn", x):
        return plan.run_fused(x2, _routing_inputs(x2, logits, router), bias, weights).view(x.shape)
    ids, w = _step_routing(x2, logits, router, top_k, scoring, renormalize, bias)
    h = _moe_qmm(x2, ids, wg, sg, bg, wu, su, bu, group_size, bits, activation, None)
    return _moe_qmm(h, ids, wd, sd, bd, None, None, None, group_size, bits, activation, w).view(x.shape)


def moe_ffn(x: torch.Tensor, router_logits: Optional[torch.Tensor], top_k: int, gate: Sequence[torch.Tensor],
            up: Sequence[torch.Tensor], down: Sequence[torch.Tensor], *, group_size: int = 64, bits: int = 4,
            activation: str = "silu", scoring: str = "softmax", renormalize: bool = True,
            selection_bias: Optional[torch.Tensor] = None, router_weight: Optional[torch.Tensor] = None
            ) -> torch.Tensor:
    """A whole MoE FFN step on MLX-affine experts: route, gate/up with the activation, down, mix.

    ``out[t] = sum_j w[t, j] * down_e(act(gate_e(x[t])) * up_e(x[t]))`` over the ``top_k`` experts
    ``e = ids[t, j]`` that :func:`moe_route` chooses from ``router_logits`` (same ``scoring``,
    ``renormalize`` and ``selection_bias``), in fp32 with one rounding of ``h`` (x's dtype) between the
    projections: the result of ``moe_route`` -> ``moe_qmm(w_up=...)`` -> ``moe_qmm(topk_weights=w)``.

    On CUDA, decode-sized calls (up to 64 routed rows, 4-bit experts, bf16/fp16 x) run three launches (route,
    gate/up, down with the mix) chained by programmatic dependent launch on sm_90+ (``MLX_NATIVE_PDL``): each
    starts while the one before finishes and waits in the kernel for its result, the down projection after
    requesting its weights. Other calls run the three ops one after the other.

    Args:
        x: ``[..., hidden]`` float32/float16/bfloat16 (rows are tokens).
        router_logits: ``[..., E]``, x's leading shape; or None with ``router_weight``.
        top_k: experts per token, ``1 <= top_k <= min(E, 64)``.
        gate, up: ``(w, scales, biases)`` of the stacked experts, ``[E, inter, hidden * bits / 32]`` /
            ``[E, inter, hidden / group_size]`` (mlx-lm's SwitchGLU ``gate_proj`` / ``up_proj``).
        down: ``(w, scales, biases)``, ``[E, hidden, inter * bits / 32]`` / ``[E, hidden, inter / group_size]``.
        group_size, bits: the quantization of all three.
        activation: "silu" (SwiGLU) or "gelu_tanh" (GeGLU).
        scoring, renormalize, selection_bias: the routing, as :func:`moe_route`.
        router_weight: ``[E, hidden]`` float, instead of ``router_logits``: the step routes ``x @ router_weight.T``
            in fp32 as :func:`moe_router` does, in the routing launch of the chain (no logits in between).

    Returns:
        ``[..., hidden]`` in x's dtype.

    Raises:
        InvalidArgumentError, UnsupportedError, UnsupportedDTypeError (before any launch).

    Example:
        >>> y = mn.moe_ffn(x, x @ router_w.T, 8, (gq, gs, gb), (uq, us, ub), (dq, ds, db))
    """
    parts = []
    for name, part in zip(_FFN_PARTS, (gate, up, down)):
        if not isinstance(part, (tuple, list)) or len(part) != 3:
            raise InvalidArgumentError(f"moe_ffn: {name} must be a (w, scales, biases) triple, got {type(part).__name__}"
                                       + (f" of {len(part)}" if isinstance(part, (tuple, list)) else ""))
        parts.extend(part)
    return _moe_ffn(x, router_logits, top_k, *parts, int(group_size), int(bits), activation, scoring,
                    bool(renormalize), selection_bias, router_weight)


# --------------------------------------------------------------------------- moe_ggml_matmul

def _validate_ggml(x, ids, raw, type_id, shape, raw_up, activation, mix):
    op = "moe_ggml_matmul"
    t = formats.parse_type(op, type_id)
    dims = formats.parse_shape(op, shape, t, min_ndim=3)
    if len(dims) != 3:
        raise InvalidArgumentError(f"{op}: shape must be (experts, N, K), got {tuple(dims)}")
    check_raw(op, raw, t, dims)
    tt, k = _check_rows(op, x, ids, dims[2])
    checks.check_same_device(op, "x", x, raw=raw)
    if raw_up is not None:
        check_raw(op, raw_up, t, dims, name="raw_up")
        checks.check_same_device(op, "x", x, raw_up=raw_up)
        _check_activation(op, activation)
    _check_mix(op, x, ids, mix, raw_up is not None, "raw_up")
    return t, dims, tt, k


def _moe_ggml_plan(x, ids, raw, type_id, shape, raw_up, activation, mix):
    t, dims, tt, k = _validate_ggml(x, ids, raw, type_id, shape, raw_up, activation, mix)
    from .kernel import MoeGgmlPlan

    return MoeGgmlPlan(x, ids, raw, t, dims, raw_up is not None, activation, tt, k, mix=mix is not None)


_GGML_PLANS = PlanCache(_moe_ggml_plan)


def _fake_moe_ggml(x, ids, raw, type_id, shape, raw_up, activation, mix):
    _, dims, tt, k = _validate_ggml(x, ids, raw, type_id, shape, raw_up, activation, mix)
    return x.new_empty((tt, dims[1]) if mix is not None else (tt, k, dims[1]))


@register_op("moe_ggml_matmul", fake=_fake_moe_ggml)
def _moe_ggml_matmul(x: torch.Tensor, ids: torch.Tensor, raw: torch.Tensor, type_id: int, shape: list[int],
                     raw_up: Optional[torch.Tensor], activation: str, mix: Optional[torch.Tensor]) -> torch.Tensor:
    key = (tensor_key(x), tensor_key(ids), tensor_key(raw), type_id, tuple(shape), tensor_key(raw_up), activation,
           tensor_key(mix))
    plan = _GGML_PLANS.get(key, x, ids, raw, type_id, shape, raw_up, activation, mix)
    checks.check_index_range("moe_ggml_matmul", "expert_ids", ids, plan.n_experts, "experts")
    if plan.empty:
        out = empty(plan.out_shape, dtype=x.dtype, device=x.device)
    elif use_triton("moe_ggml_matmul", x):
        out = plan(x, ids, raw, raw_up, mix)
    else:
        out = plan.reference(x, ids, raw, raw_up)
    return _mixed(out, mix)


def moe_ggml_matmul(x: torch.Tensor, expert_ids: torch.Tensor, raw: torch.Tensor, ggml_type: TypeArg,
                    shape: Sequence[int], *, raw_up: Optional[torch.Tensor] = None,
                    activation: str = "silu", topk_weights: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Expert-routed matmul on GGUF experts (``ffn_gate_exps`` & co.), straight on the raw blocks.

    Args:
        x: ``[T, K]`` or ``[T, top_k, K]``.
        expert_ids: ``[T, top_k]`` int32/int64.
        raw: uint8 bytes of the stacked experts as in the file.
        ggml_type: any type :func:`ggml_matmul` takes.
        shape: ``(E, N, K)`` (GGUF ``ne = [K, N, E]``).
        raw_up, activation: the fused gate/up pair, as in :func:`moe_qmm`.
        topk_weights: optional ``[T, top_k]`` routing weights (not with ``raw_up``): the slots are mixed,
            ``out[t] = sum_j topk_weights[t, j] * x[t, j] @ W[expert_ids[t, j]].T`` in fp32, the down projection
            and :func:`moe_weighted_reduce` in one launch where the decode kernels take the call.

    Returns:
        ``[T, top_k, N]`` in x's dtype (``[T, N]`` with ``topk_weights``).
    """
    return _moe_ggml_matmul(x, expert_ids, raw, formats.parse_type("moe_ggml_matmul", ggml_type).id,
                            _shape_list(shape), raw_up, activation, topk_weights)


# --------------------------------------------------------------------------- moe_ggml_ffn

def _ggml_parts(op: str, parts) -> list:
    """``(gate, up, down)``, each a ``(raw, ggml_type)`` pair -> ``[raw_g, type_g, raw_u, type_u, raw_d, type_d]``
    (type ids)."""
    flat = []
    for name, part in zip(_FFN_PARTS, parts):
        if not isinstance(part, (tuple, list)) or len(part) != 2:
            raise InvalidArgumentError(f"{op}: {name} must be a (raw, ggml_type) pair, got {type(part).__name__}"
                                       + (f" of {len(part)}" if isinstance(part, (tuple, list)) else ""))
        flat += [part[0], formats.parse_type(f"{op}: {name}", part[1]).id]
    return flat


def _ggml_rows(op: str, name: str, raw: torch.Tensor, t, experts: int, k: int) -> int:
    """Rows per expert of ``raw`` (bytes of ``experts`` stacked ``[N, k]`` matrices of type ``t``)."""
    if k % t.block_elems:
        raise InvalidArgumentError(f"{op}: {name} rows of {k} values are not whole {t.name} blocks of "
                                   f"{t.block_elems}")
    per_row = experts * formats.row_bytes(t, k)
    if raw.numel() == 0 or raw.numel() % per_row:
        raise FormatError(f"{op}: {name} has {raw.numel()} bytes, not {experts} experts of whole {t.name} rows of "
                          f"{k} values ({formats.row_bytes(t, k)} bytes each)")
    return raw.numel() // per_row


def _validate_ggml_ffn(x, logits, top_k, rg, tg, ru, tu, rd, td, activation, scoring, renormalize, bias, router):
    """-> ``(experts, hidden, inter)``; the intermediate size comes from the gate's bytes."""
    op = "moe_ggml_ffn"
    e = _check_step(op, x, logits, router, top_k, scoring, renormalize, bias, activation)
    hidden = x.shape[-1]
    types = [formats.BY_ID[i] for i in (tg, tu, td)]
    for name, raw in zip(_FFN_PARTS, (rg, ru, rd)):
        checks.check_tensor(op, name, raw, RAW_DTYPES, min_ndim=0)
        checks.check_same_device(op, "x", x, **{name: raw})
    inter = _ggml_rows(op, "gate", rg, types[0], e, hidden)
    up_rows = _ggml_rows(op, "up", ru, types[1], e, hidden)
    if up_rows != inter:
        raise InvalidArgumentError(f"{op}: up holds {up_rows} rows per expert, the gate {inter}")
    down_rows = _ggml_rows(op, "down", rd, types[2], e, inter)
    if down_rows != hidden:
        raise InvalidArgumentError(f"{op}: down holds {down_rows} rows of {inter} values per expert; expected hidden = "
                                   f"{hidden} (from x)")
    for name, raw, t, (n, k) in zip(_FFN_PARTS, (rg, ru, rd), types, ((inter, hidden), (inter, hidden),
                                                                       (hidden, inter))):
        check_raw(op, raw, t, (e, n, k), name=name)
    return e, hidden, inter


def _moe_ggml_ffn_plan(x, logits, top_k, rg, tg, ru, tu, rd, td, activation, scoring, renormalize, bias, router):
    e, hidden, inter = _validate_ggml_ffn(x, logits, top_k, rg, tg, ru, tu, rd, td, activation, scoring,
                                          renormalize, bias, router)
    from .kernel import MoeGgmlFfnPlan

    return MoeGgmlFfnPlan(x, logits, router, top_k, (tg, tu, td), e, hidden, inter, activation, scoring,
                          renormalize, bias, (rg.numel(), ru.numel(), rd.numel()))


_GGML_FFN_PLANS = PlanCache(_moe_ggml_ffn_plan)


def _fake_moe_ggml_ffn(x, logits, top_k, rg, tg, ru, tu, rd, td, activation, scoring, renormalize, bias, router):
    _validate_ggml_ffn(x, logits, top_k, rg, tg, ru, tu, rd, td, activation, scoring, renormalize, bias, router)
    return x.new_empty(x.shape)


@register_op("moe_ggml_ffn", fake=_fake_moe_ggml_ffn)
def _moe_ggml_ffn(x: torch.Tensor, logits: Optional[torch.Tensor], top_k: int, rg: torch.Tensor, tg: int,
                  ru: torch.Tensor, tu: int, rd: torch.Tensor, td: int, activation: str, scoring: str,
                  renormalize: bool, bias: Optional[torch.Tensor], router: Optional[torch.Tensor]) -> torch.Tensor:
    key = (tensor_key(x), tensor_key(logits), top_k, tensor_key(rg), tg, tensor_key(ru), tu, tensor_key(rd), td,
           activation, scoring, renormalize, tensor_key(bias), tensor_key(router))
    plan = _GGML_FFN_PLANS.get(key, x, logits, top_k, rg, tg, ru, tu, rd, td, activation, scoring, renormalize, bias,
                               router)
    if plan.empty:
        return empty(x.shape, dtype=x.dtype, device=x.device)
    x2 = x.reshape(-1, x.shape[-1])
    if plan.fused and use_triton("moe_ggml_ffn", x):
        return plan.run_fused(x2, _routing_inputs(x2, logits, router), bias, (rg, ru, rd)).view(x.shape)
    ids, w = _step_routing(x2, logits, router, top_k, scoring, renormalize, bias)
    e, hidden, inter = plan.dims
    if tg == tu:
        h = _moe_ggml_matmul(x2, ids, rg, tg, [e, inter, hidden], ru, activation, None)
    else:
        h = gated_mul(_moe_ggml_matmul(x2, ids, rg, tg, [e, inter, hidden], None, activation, None),
                      _moe_ggml_matmul(x2, ids, ru, tu, [e, inter, hidden], None, activation, None), activation)
    return _moe_ggml_matmul(h, ids, rd, td, [e, hidden, inter], None, activation, w).view(x.shape)


def moe_ggml_ffn(x: torch.Tensor, router_logits: Optional[torch.Tensor], top_k: int, gate: Sequence, up: Sequence,
                 down: Sequence, *, activation: str = "silu", scoring: str = "softmax", renormalize: bool = True,
                 selection_bias: Optional[torch.Tensor] = None, router_weight: Optional[torch.Tensor] = None
                 ) -> torch.Tensor:
    """A whole MoE FFN step on GGUF experts (``ffn_gate_exps``, ``ffn_up_exps``, ``ffn_down_exps`` of a llama.cpp
    file): route, gate/up with the activation, down, mix; :func:`moe_ffn` for GGUF blocks.

    ``out[t] = sum_j w[t, j] * down_e(act(gate_e(x[t])) * up_e(x[t]))`` over the ``top_k`` experts ``e = ids[t, j]``
    that :func:`moe_route` chooses, with one rounding of ``h`` (x's dtype) between the projections: the result of
    ``moe_route`` -> ``moe_ggml_matmul(raw_up=...)`` -> ``moe_ggml_matmul(topk_weights=w)``.

    On CUDA, decode-sized calls (up to 16 routed rows, bf16/fp16 x) whose gate and up share a type and whose
    projections the routed decode kernels take (Q4_K / Q5_K: ``ops/moe/gguf_idot.py``, Q6_K / Q8_0:
    ``ops/moe/gguf_mv.py``; e.g. Q4_K gate/up and a Q6_K down, as in Q4_K_M files) run three launches chained by
    programmatic dependent launch on sm_90+ (``MLX_NATIVE_PDL``): the gate/up launch waits in the kernel for the
    routing and lets the down projection start, which requests its routing (and, Q4_K / Q5_K rows of one loop step,
    its weights) before it waits for h; the down projection mixes the slots. Other calls (and a first call during a
    CUDA-graph capture) run the ops one after the other.

    Args:
        x: ``[..., hidden]`` float32/float16/bfloat16 (rows are tokens).
        router_logits: ``[..., E]``, x's leading shape; or None with ``router_weight``.
        top_k: experts per token, ``1 <= top_k <= min(E, 64)``.
        gate, up: ``(raw, ggml_type)``: the uint8 bytes of the ``E`` stacked ``[inter, hidden]`` matrices as in the
            file, and any type :func:`ggml_matmul` takes (inter follows from the bytes).
        down: ``(raw, ggml_type)`` of the ``[hidden, inter]`` matrices.
        activation: "silu" (SwiGLU) or "gelu_tanh" (GeGLU).
        scoring, renormalize, selection_bias: the routing, as :func:`moe_route`.
        router_weight: ``[E, hidden]`` float, instead of ``router_logits``: the step routes ``x @ router_weight.T``
            in fp32 as :func:`moe_router` does, in the routing launch of the chain (no logits in between).

    Returns:
        ``[..., hidden]`` in x's dtype.

    Raises:
        InvalidArgumentError, UnsupportedError, UnsupportedDTypeError, FormatError (bytes that are no whole rows of
        the experts), before any launch.

    Example:
        >>> y = mn.moe_ggml_ffn(x, x @ router_w.T, 8, (gate_raw, "Q4_K"), (up_raw, "Q4_K"), (down_raw, "Q6_K"))
    """
    flat = _ggml_parts("moe_ggml_ffn", (gate, up, down))
    return _moe_ggml_ffn(x, router_logits, top_k, *flat, activation, scoring, bool(renormalize), selection_bias,
                         router_weight)


# --------------------------------------------------------------------------- moe_weighted_reduce

def _validate_reduce(y, weights):
    op = "moe_weighted_reduce"
    checks.check_tensor(op, "y", y, min_ndim=2)
    checks.check_tensor(op, "weights", weights)
    checks.check_same_device(op, "y", y, weights=weights)
    checks.check_last_dim_contiguous(op, "y", y)
    if weights.shape != y.shape[:-1]:
        raise InvalidArgumentError(
            f"{op}: weights has shape {tuple(weights.shape)}, expected {tuple(y.shape[:-1])} (y's shape without its last dim)")


def _reduce_plan(y, weights):
    _validate_reduce(y, weights)
    from .kernel import ReducePlan

    return ReducePlan(y, weights)


_REDUCE_PLANS = PlanCache(_reduce_plan)


def _fake_reduce(y, weights):
    _validate_reduce(y, weights)
    return y.new_empty((*y.shape[:-2], y.shape[-1]))


@register_op("moe_weighted_reduce", fake=_fake_reduce)
def _moe_weighted_reduce(y: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    plan = _REDUCE_PLANS.get((tensor_key(y), tensor_key(weights)), y, weights)
    if plan.empty:
        return empty(plan.out_shape, dtype=y.dtype, device=y.device)
    if use_triton("moe_weighted_reduce", y):
        return plan(y, weights)
    return ref.weighted_reduce(y, weights)


def moe_weighted_reduce(y: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Mix the experts' outputs: ``out[..., :] = sum_j weights[..., j] * y[..., j, :]`` (fp32 math).

    Args:
        y: ``[..., top_k, H]`` expert outputs.
        weights: ``[..., top_k]`` (any float dtype, e.g. float32 from :func:`moe_route`).

    Returns:
        ``[..., H]`` in y's dtype.
    """
    return _moe_weighted_reduce(y, weights)
