"""Quantized matmul family: MLX affine, GGUF blocks, MoE expert routing.

    python bench/run_all.py --out DIR --families quant      # the rows (with peers)
    python bench/quant.py --sweep                           # launch-config sweep (prints a table)
    python bench/quant.py --summary DIR/results.json        # bandwidth / TFLOP/s summary with the targets

Peers measured in the same run: torch bf16 ``matmul`` (cuBLAS) on the dequantized
weight, ``torch.ops.aten._weight_int4pack_mm`` (tinygemm) for 4-bit affine weights,
and for MoE a torch bf16 implementation (gather the chosen experts, bmm). Decode rows
also time ``mlx-native[2-kernel split-K]``: our kernels with the K split summed by a
second launch instead of in the split launch (``qmm.FUSED_SPLITK = False``). ``bytes``
of a row are the weight bytes read (packed codes + scales/biases or GGUF blocks;
for MoE those of the chosen experts) plus activations in and out; ``flops`` 2MNK.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from common import Case, Impl  # noqa: E402
from read_ceiling import add_read_ceiling  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.ggml import formats  # noqa: E402
from mlx_native.ops.ggml.kernel import MatmulPlan  # noqa: E402
from mlx_native.ops.quant import qmm  # noqa: E402
from mlx_native.ops.quant.kernel import QmmPlan  # noqa: E402
from mlx_native.ops.quant import ref as qref  # noqa: E402

DT = torch.bfloat16
SHAPES = [(4096, 4096), (4096, 14336), (14336, 4096)]  # (K, N): in x out features
DECODE_M = [1]
SMALL_M = [2, 4, 8, 16]  # on SMALL_M_SHAPES
SMALL_M_SHAPES = [(4096, 14336)]
GGUF_M16_SHAPES = [s for s in SHAPES if s not in SMALL_M_SHAPES]  # GGUF decode at M = 16 on the other shapes
PREFILL = [(1024, 4096, 4096), (1024, 4096, 14336), (1024, 14336, 4096), (4096, 4096, 14336), (256, 4096, 14336)]  # M, K, N
MID = [(32, 4096, 14336), (64, 4096, 14336), (128, 4096, 14336), (64, 14336, 4096)]  # M, K, N: batches past decode
GGUF_MAIN = ["Q4_0", "Q4_K"]
GGUF_OTHER = ["Q4_1", "Q8_0", "Q5_K", "Q6_K"]
OTHER_SHAPES = [(4096, 14336), (14336, 4096)]
OTHER_ROWS = [2, 4, 8, 16]  # GGUF_OTHER at a few rows of x, on OTHER_SHAPES[0] (8, 16: Q6_K / Q8_0 on block_mmv)
MOE = [  # (name, experts, top_k, hidden, intermediate, tokens)
    ("qwen3-30b-a3b", 128, 8, 2048, 768, 1),
    ("qwen3.6-35b-a3b", 256, 8, 2048, 512, 1),
    ("qwen3-30b-a3b", 128, 8, 2048, 768, 512),
]
ROUTERS = [  # (name, experts, top_k, hidden, tokens): the router projection + routing at decode sizes
    ("qwen3-30b-a3b", 128, 8, 2048, 1),
    ("qwen3-30b-a3b", 128, 8, 2048, 4),
    ("qwen3-30b-a3b", 128, 8, 2048, 16),
    ("qwen3-30b-a3b", 128, 8, 2048, 32),  # past RouterPlan.MAX_ROWS: the fp32 matmul, then the routing launch
    ("qwen3.6-35b-a3b", 256, 8, 2048, 1),
]
MOE_GGML = [  # (name, gate / up type, down type, experts, top_k, hidden, intermediate, tokens): GGUF experts
    ("qwen3-30b-a3b", "Q4_K", "Q4_K", 128, 8, 2048, 768, 1),
    ("qwen3-30b-a3b", "Q4_K", "Q6_K", 128, 8, 2048, 768, 1),  # a Q4_K_M file's Q6_K layers
    ("qwen3-30b-a3b", "Q5_K", "Q5_K", 128, 8, 2048, 768, 1),
]
FP16_FIELDS = {"Q4_0": (0,), "Q4_1": (0, 2), "Q8_0": (0,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}


# ----------------------------------------------------------------------------- inputs


def affine_weight(n, k, gs=64, bits=4, lead=()):
    w = torch.randn(*lead, n, k, device=common.DEVICE, dtype=DT) * 0.02
    return mn.quantize(w, gs, bits)


def affine_bytes(n, k, gs=64, bits=4, sdtype=DT):
    return n * k * bits // 8 + 2 * n * (k // gs) * torch.empty((), dtype=sdtype).element_size()


def gguf_raw(name, n, k, lead=1):
    """Random blocks with sane fp16 scale fields, on the bench device."""
    t = formats.BY_NAME[name]
    nb = lead * n * k // t.block_elems
    raw = torch.randint(0, 256, (nb, t.block_bytes), dtype=torch.uint8, device=common.DEVICE)
    for off in FP16_FIELDS[name]:
        vals = (torch.rand(nb, 1, device=common.DEVICE) * 0.01 + 0.001).to(torch.float16)
        raw[:, off:off + 2] = vals.view(torch.uint8)
    return raw.reshape(-1)


def int4pack_peer(gs):
    """tinygemm: w = (q - 8) * scale + zero with zero = bias + 8 * scale. Verified on first use."""
    checked = {}

    def fn(x, wq, s, b, w_bf16, packed, sz):
        out = torch.ops.aten._weight_int4pack_mm(x, packed, gs, sz)
        if not checked:
            want = x @ w_bf16.T
            err = common.rel_err(out, want)
            if err > 2e-2:
                raise RuntimeError(f"int4pack packing mismatch ({err:.2e})")
            checked["ok"] = True
        return out

    return fn


def decode_call(fmt: str, n: int, k: int):
    """``(weight bytes, fn, make)`` of one decode matmul for the sweeps: ``fn(x, *make())`` runs ours on an
    ``(n, k)`` weight of ``fmt`` (``"affine"``: MLX 4-bit g64; else a GGUF type name) made by ``make()``."""
    if fmt == "affine":
        return (affine_bytes(n, k), lambda x, wq, s, b: mn.quantized_matmul(x, wq, s, b),
                lambda: affine_weight(n, k))
    return (n * formats.row_bytes(formats.BY_NAME[fmt], k), lambda x, raw: mn.ggml_matmul(x, raw, fmt, (n, k)),
            lambda: (gguf_raw(fmt, n, k),))


def int4pack_args(wq, s, b):
    q = qref.unpack(wq, 4)
    u8 = ((q[:, ::2] << 4) | q[:, 1::2]).to(torch.uint8)
    packed = torch.ops.aten._convert_weight_to_int4pack(u8, 8)
    sz = torch.stack([s.float(), b.float() + 8 * s.float()], -1).transpose(0, 1).contiguous().to(DT)
    return packed, sz


# ----------------------------------------------------------------------------- cases

TWO_KERNEL = "mlx-native[2-kernel split-K]"


def two_kernel_splitk(build, call):
    """Ours with a plan built under ``qmm.FUSED_SPLITK = False``: the decode kernels (mmv, gemv) store
    their K-split partials and ``splitk_reduce_kernel`` sums them in a second launch, where the default
    sums them in the split launch. ``build(*inputs)`` makes the plan (shapes only, so one serves every
    input set), ``call(plan, *inputs)`` runs it."""
    plans = []

    def run(*inputs):
        if not plans:
            saved, qmm.FUSED_SPLITK = qmm.FUSED_SPLITK, False
            try:
                plans.append(build(*inputs))
            finally:
                qmm.FUSED_SPLITK = saved
        return call(plans[0], *inputs)

    return Impl(run)


def _affine_case(regime, m, k, n, gs=64, bits=4, int4=True):
    wbytes = affine_bytes(n, k, gs, bits)
    use_int4 = int4 and bits == 4 and common.DEVICE == "cuda" and hasattr(torch.ops.aten, "_weight_int4pack_mm")

    def make():
        wq, s, b = affine_weight(n, k, gs, bits)
        x = torch.randn(m, k, device=common.DEVICE, dtype=DT)
        wd = mn.dequantize(wq, s, b, gs, bits)
        extra = int4pack_args(wq, s, b) if use_int4 else (None, None)
        return (x, wq, s, b, wd, *extra)

    impls = {
        "mlx-native": Impl(lambda x, wq, s, b, *_: mn.quantized_matmul(x, wq, s, b, True, gs, bits)),
        "torch bf16 matmul (cuBLAS)": Impl(lambda x, wq, s, b, wd, *_: x @ wd.T),
    }
    if use_int4:
        impls["torch _weight_int4pack_mm"] = Impl(int4pack_peer(gs))
    if regime == "decode":
        impls[TWO_KERNEL] = two_kernel_splitk(
            lambda x, wq, s, b, *_: QmmPlan(x, wq, s, b, True, gs, bits, n, k, DT),
            lambda plan, x, wq, s, b, *_: plan(x, wq, s, b))
    case = Case("quant", f"qmm_affine_{bits}b_g{gs}", f"M{m} K{k} N{n}", str(DT), regime,
                wbytes + 2 * (m * k + m * n), make, impls, flops=2 * m * n * k)
    return add_read_ceiling(case, wbytes) if regime == "decode" else case


def _gguf_case(regime, name, m, k, n):
    t = formats.BY_NAME[name]
    wbytes = n * formats.row_bytes(t, k)

    def make():
        raw = gguf_raw(name, n, k)
        return (torch.randn(m, k, device=common.DEVICE, dtype=DT), raw, mn.ggml_dequantize(raw, name, (n, k), dtype=DT))

    impls = {
        "mlx-native": Impl(lambda x, raw, wd: mn.ggml_matmul(x, raw, name, (n, k))),
        "torch bf16 matmul (cuBLAS)": Impl(lambda x, raw, wd: x @ wd.T),
    }
    if regime == "decode":
        impls[TWO_KERNEL] = two_kernel_splitk(lambda x, raw, wd: MatmulPlan(x, raw, t, n, k),
                                              lambda plan, x, raw, wd: plan(x, raw))
    case = Case("quant", f"ggml_matmul_{name}", f"M{m} K{k} N{n}", str(DT), regime, wbytes + 2 * (m * k + m * n),
                make, impls, flops=2 * m * n * k)
    return add_read_ceiling(case, wbytes) if regime == "decode" else case


def _moe_case(label, e, topk, hidden, inter, tokens):
    regime = "decode" if tokens <= 16 else "large"
    gq = affine_weight(inter, hidden, lead=(e,))
    uq = affine_weight(inter, hidden, lead=(e,))
    dq = affine_weight(hidden, inter, lead=(e,))
    gd, ud, dd = (mn.dequantize(*w) for w in (gq, uq, dq))
    per_expert = 2 * affine_bytes(inter, hidden) + affine_bytes(hidden, inter)
    used = min(e, tokens * topk)  # experts touched (upper bound for tokens > 1)
    nbytes = used * per_expert + 4 * tokens * hidden

    def make():
        return (torch.randn(tokens, hidden, device=common.DEVICE, dtype=DT),
                torch.randn(tokens, e, device=common.DEVICE, dtype=torch.float32))

    def ours(x, logits):  # the whole step: two launches routing in the kernels at decode sizes
        return mn.moe_ffn(x, logits, topk, gq, uq, dq)

    def three_launches(x, logits):  # route, gate/up, down mixed over the slots
        ids, w = mn.moe_route(logits, topk)
        h = mn.moe_qmm(x, ids, *gq, w_up=uq[0], scales_up=uq[1], biases_up=uq[2])
        return mn.moe_qmm(h, ids, *dq, topk_weights=w)

    impls = {"mlx-native": Impl(ours), "mlx-native[3 launches]": Impl(three_launches),
             TORCH_MOE: Impl(_torch_moe(gd, ud, dd, topk), tolerance=5e-2)}
    flops = 2 * tokens * topk * 3 * hidden * inter
    case = Case("quant", f"moe_ffn_{label}", f"T{tokens} E{e} top{topk} H{hidden} I{inter}", str(DT), regime, nbytes,
                make, impls, flops=flops)
    return add_read_ceiling(case, used * per_expert) if regime == "decode" else case


def _router_case(label, e, topk, hidden, tokens):
    """``moe_router`` (the router projection and the routing in one launch) against the two steps (cuBLAS logits,
    then ``moe_route``) and torch; each returns the chosen weights (sorted: a near tie that two logit roundings
    order differently does not count)."""
    rw = torch.randn(e, hidden, device=common.DEVICE, dtype=DT) * 0.02
    nbytes = rw.numel() * rw.element_size() + 2 * tokens * hidden

    def make():
        return (torch.randn(tokens, hidden, device=common.DEVICE, dtype=DT),)

    def torch_route(x):
        w = torch.topk(torch.softmax(torch.nn.functional.linear(x, rw).float(), -1), topk, -1).values
        return w / w.sum(-1, keepdim=True)

    impls = {"mlx-native": Impl(lambda x: mn.moe_router(x, rw, topk)[1]),
             "mlx-native[cuBLAS logits + moe_route]": Impl(
                 lambda x: mn.moe_route(torch.nn.functional.linear(x, rw), topk)[1]),
             "torch (F.linear + softmax + topk)": Impl(torch_route)}
    case = Case("quant", f"moe_router_{label}", f"T{tokens} E{e} top{topk} H{hidden}", str(DT), "decode", nbytes,
                make, impls, flops=2 * tokens * e * hidden)
    return add_read_ceiling(case, rw.numel() * rw.element_size())


def _moe_step_case(label, e, topk, hidden, inter, gguf=None):
    """One token's whole MoE FFN from the normed row: router, routing, experts, mix (``router_weight=``), against
    the same step fed cuBLAS logits, and torch. ``gguf``: the experts' GGUF type (None: MLX affine 4-bit)."""
    rw = torch.randn(e, hidden, device=common.DEVICE, dtype=DT) * 0.02
    shapes = ((e, inter, hidden), (e, inter, hidden), (e, hidden, inter))
    if gguf is None:
        parts = [affine_weight(n, k, lead=(e,)) for _, n, k in shapes]
        dense = [mn.dequantize(*w) for w in parts]
        per_expert = 2 * affine_bytes(inter, hidden) + affine_bytes(hidden, inter)

        def step(x, logits=None, router=None):
            return mn.moe_ffn(x, logits, topk, *parts, router_weight=router)
    else:
        parts = [(gguf_raw(gguf, n, k, e), gguf) for _, n, k in shapes]
        dense = [mn.ggml_dequantize(r, gguf, sh, dtype=DT) for (r, _), sh in zip(parts, shapes)]
        per_expert = sum(sh[1] * formats.row_bytes(formats.BY_NAME[gguf], sh[2]) for sh in shapes)

        def step(x, logits=None, router=None):
            return mn.moe_ggml_ffn(x, logits, topk, *parts, router_weight=router)
    floor = min(e, topk) * per_expert + rw.numel() * rw.element_size()
    torch_moe = _torch_moe(*dense, topk)

    def make():
        return (torch.randn(1, hidden, device=common.DEVICE, dtype=DT) * 4,)

    impls = {"mlx-native": Impl(lambda x: step(x, router=rw)),
             "mlx-native[cuBLAS logits]": Impl(lambda x: step(x, torch.nn.functional.linear(x, rw))),
             TORCH_MOE: Impl(lambda x: torch_moe(x, torch.nn.functional.linear(x, rw)), tolerance=5e-2)}
    kind = "mlx4" if gguf is None else gguf
    case = Case("quant", f"moe_step_{label}", f"T1 E{e} top{topk} H{hidden} I{inter} {kind} +router", str(DT),
                "decode", floor + 4 * hidden, make, impls, flops=2 * topk * 3 * hidden * inter)
    return add_read_ceiling(case, floor)


TORCH_MOE = "torch bf16 (gather experts + bmm)"


def _torch_moe(gd, ud, dd, topk):
    """The peer of the MoE rows: softmax top-k routing and the experts' dequantized bf16 weights gathered per slot,
    ``bmm`` for gate / up / down, the mix in fp32."""
    def step(x, logits):
        tokens, hidden = x.shape
        p = torch.softmax(logits, -1)
        w, ids = torch.topk(p, topk, -1)
        w = w / w.sum(-1, keepdim=True)
        flat = ids.reshape(-1)
        xr = x.repeat_interleave(topk, 0).unsqueeze(-1)
        g = torch.bmm(gd.index_select(0, flat), xr)
        u = torch.bmm(ud.index_select(0, flat), xr)
        h = torch.nn.functional.silu(g) * u
        y = torch.bmm(dd.index_select(0, flat), h).squeeze(-1).reshape(tokens, topk, hidden)
        return (y.float() * w.unsqueeze(-1)).sum(1).to(x.dtype)
    return step


def _moe_ggml_case(label, gate_type, down_type, e, topk, hidden, inter, tokens):
    """``moe_ggml_ffn`` at decode sizes (GGUF gate / up of ``gate_type``, down of ``down_type``)."""
    raws = (gguf_raw(gate_type, inter, hidden, e), gguf_raw(gate_type, inter, hidden, e),
            gguf_raw(down_type, hidden, inter, e))
    shapes = ((e, inter, hidden), (e, inter, hidden), (e, hidden, inter))
    types = (gate_type, gate_type, down_type)
    gd, ud, dd = (mn.ggml_dequantize(r, t, sh, dtype=DT) for r, t, sh in zip(raws, types, shapes))
    per_expert = sum(sh[1] * formats.row_bytes(formats.BY_NAME[t], sh[2]) for t, sh in zip(types, shapes))
    used = min(e, tokens * topk)
    nbytes = used * per_expert + 4 * tokens * hidden

    def make():
        return (torch.randn(tokens, hidden, device=common.DEVICE, dtype=DT),
                torch.randn(tokens, e, device=common.DEVICE, dtype=torch.float32))

    def ours(x, logits):
        return mn.moe_ggml_ffn(x, logits, topk, *zip(raws, types))

    def three_launches(x, logits):  # route, gate/up, down mixed over the slots
        ids, w = mn.moe_route(logits, topk)
        h = mn.moe_ggml_matmul(x, ids, raws[0], gate_type, shapes[0], raw_up=raws[1])
        return mn.moe_ggml_matmul(h, ids, raws[2], down_type, shapes[2], topk_weights=w)

    impls = {"mlx-native": Impl(ours), "mlx-native[3 launches]": Impl(three_launches),
             TORCH_MOE: Impl(_torch_moe(gd, ud, dd, topk), tolerance=5e-2)}
    shape = f"T{tokens} E{e} top{topk} H{hidden} I{inter} {gate_type}/{down_type}"
    case = Case("quant", f"moe_ggml_ffn_{label}", shape, str(DT), "decode", nbytes, make, impls,
                flops=2 * tokens * topk * 3 * hidden * inter)
    return add_read_ceiling(case, used * per_expert)


def cases() -> list[Case]:
    out = []
    for k, n in SHAPES:
        for m in DECODE_M:
            out.append(_affine_case("decode", m, k, n))
            for name in GGUF_MAIN:
                out.append(_gguf_case("decode", name, m, k, n))
    for k, n in SMALL_M_SHAPES:
        for m in SMALL_M:
            out.append(_affine_case("decode", m, k, n))
            for name in GGUF_MAIN:
                out.append(_gguf_case("decode", name, m, k, n))
    for k, n in GGUF_M16_SHAPES:
        for name in GGUF_MAIN:
            out.append(_gguf_case("decode", name, 16, k, n))
    for k, n in OTHER_SHAPES:
        for name in GGUF_OTHER:
            out.append(_gguf_case("decode", name, 1, k, n))
    k, n = OTHER_SHAPES[0]
    for name in GGUF_OTHER:
        for m in OTHER_ROWS:
            out.append(_gguf_case("decode", name, m, k, n))
    for bits, gs in ((8, 64), (3, 64), (5, 64), (6, 64), (4, 32), (4, 128)):
        out.append(_affine_case("decode", 1, k, n, gs, bits))
    for m, k, n in MID + PREFILL:
        out.append(_affine_case("large", m, k, n))
        for name in GGUF_MAIN:
            out.append(_gguf_case("large", name, m, k, n))
    for spec in MOE:
        out.append(_moe_case(*spec))
    for spec in MOE_GGML:
        out.append(_moe_ggml_case(*spec))
    for spec in ROUTERS:
        out.append(_router_case(*spec))
    out.append(_moe_step_case("qwen3-30b-a3b", 128, 8, 2048, 768))
    out.append(_moe_step_case("qwen3-30b-a3b", 128, 8, 2048, 768, "Q4_K"))
    return out


# ----------------------------------------------------------------------------- sweep


def sweep():
    """Time launch configs of the qmm kernel (decode, small-M, prefill) against cuBLAS bf16."""
    from mlx_native.runtime import plans

    copy_bw = common.copy_bandwidth()
    print(f"copy bandwidth {copy_bw / 1e12:.3f} TB/s", flush=True)
    results = []

    def run(label, kind, m, k, n, fmt, configs):
        wb = affine_bytes(n, k) if fmt == "affine" else n * formats.row_bytes(formats.BY_NAME[fmt], k)
        nsets = max(2, min(16, math.ceil(256e6 / wb)))
        sets = []
        for _ in range(nsets):
            x = torch.randn(m, k, device="cuda", dtype=DT)
            if fmt == "affine":
                wq, s, b = affine_weight(n, k)
                sets.append((x, wq, s, b))
            else:
                sets.append((x, gguf_raw(fmt, n, k)))
        if fmt == "affine":
            fn = lambda x, wq, s, b: mn.quantized_matmul(x, wq, s, b)  # noqa: E731
        else:
            fn = lambda x, raw: mn.ggml_matmul(x, raw, fmt, (n, k))  # noqa: E731
        wd = [torch.randn(n, k, device="cuda", dtype=DT) for _ in range(max(2, min(8, math.ceil(256e6 / (2 * n * k)))))]
        t_cublas = common.time_any(lambda w, x: x @ w.T, [(w, sets[0][0]) for w in wd])
        for cfg in configs:
            qmm.CONFIG_OVERRIDE = (lambda c: (lambda *a: c))(cfg)
            plans.clear_all()
            try:
                t = common.time_any(fn, sets)
            except Exception as exc:  # noqa: BLE001
                print(f"{label} {cfg}: {exc!r}"[:300], flush=True)
                continue
            row = dict(label=label, kind=kind, m=m, k=k, n=n, fmt=fmt, cfg=str(cfg), us=t, cublas_us=t_cublas,
                       frac_copy=wb / (t * 1e-6) / copy_bw, vs_cublas=t_cublas / t,
                       tflops=2 * m * n * k / (t * 1e-6) / 1e12)
            results.append(row)
            print(f"{label:10s} M{m:<5d} K{k:<6d} N{n:<6d} {fmt:7s} {str(cfg):110s} {t:9.2f} us "
                  f"{100 * row['frac_copy']:5.1f}% copy  cuBLAS {t_cublas:8.2f} us ({row['vs_cublas']:.2f}x) "
                  f"{row['tflops']:.0f} TF", flush=True)
        qmm.CONFIG_OVERRIDE = None
        plans.clear_all()

    C = qmm.Config
    gemv = [C(1, bn, bk, sp, False, w, 1) for bn, bk, w in ((8, 512, 4), (16, 512, 4), (16, 1024, 4), (8, 1024, 4),
                                                            (32, 1024, 8), (16, 2048, 4)) for sp in (1, 2, 4)]
    small = [C(16, bn, bk, sp, True, w, 1, 1, sw) for bn, bk, w, sw in (
        (64, 128, 4, True), (128, 128, 4, True), (64, 256, 4, True), (128, 256, 8, True), (64, 128, 4, False))
        for sp in (1, 2, 4)]
    pre = [C(bm, bn, bk, 1, True, w, st, 8) for bm, bn, bk, w, st in (
        (128, 128, 64, 8, 1), (128, 128, 64, 8, 2), (128, 256, 64, 8, 1), (256, 128, 64, 8, 1), (128, 128, 128, 8, 1),
        (64, 128, 64, 4, 1))]
    only = os.environ.get("SWEEP_ONLY", "gemv,small,prefill").split(",")
    for fmt in ("affine", "Q4_0", "Q4_K"):
        if "gemv" in only:
            for k, n in SHAPES:
                run("gemv", "gemv", 1, k, n, fmt, gemv)
        if "small" in only:
            run("small", "decode", 8, 4096, 14336, fmt, small)
        if "prefill" in only:
            run("prefill", "prefill", 2048, 4096, 14336, fmt, pre)
            # reference point: dequantize the whole weight to bf16, then cuBLAS
            m, k, n = 2048, 4096, 14336
            sets = [(torch.randn(m, k, device="cuda", dtype=DT),
                     affine_weight(n, k) if fmt == "affine" else gguf_raw(fmt, n, k)) for _ in range(2)]
            if fmt == "affine":
                fn = lambda x, w: x @ mn.dequantize(*w).T  # noqa: E731
            else:
                fn = lambda x, raw: x @ mn.ggml_dequantize(raw, fmt, (n, k), dtype=DT).T  # noqa: E731
            t = common.time_any(fn, sets)
            print(f"prefill    M{m:<5d} K{k:<6d} N{n:<6d} {fmt:7s} dequantize + cuBLAS {t:9.2f} us "
                  f"{2 * m * n * k / (t * 1e-6) / 1e12:.0f} TF", flush=True)
    return results


# ----------------------------------------------------------------------------- summary


def summary(path: str) -> str:
    """Markdown: our rows with weight bandwidth, TFLOP/s and the ratios the issue's targets name."""
    data = json.load(open(path))
    copy_bw = data["copy_bandwidth_Bps"]
    rows = [r for r in data["rows"] if r.get("family") == "quant"]
    lines = [f"copy bandwidth {copy_bw / 1e12:.2f} TB/s", "",
             "| op | shape | regime | ours us | % copy BW (weights) | % read ceiling | TFLOP/s | cuBLAS bf16 us | "
             "vs cuBLAS | int4pack us | vs int4pack |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['op']} | {r['shape']} | {r['regime']} | error | | | | | | | |")
            continue
        main = r["graph_us"] if r["regime"] == "decode" and "graph_us" in r else r["eager_us"]
        ours = main.get("mlx-native")
        cub = main.get("torch bf16 matmul (cuBLAS)")
        i4 = main.get("torch _weight_int4pack_mm")
        f = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
        tf = r["flops"] / (ours * 1e-6) / 1e12 if ours and r.get("flops") else None
        lines.append(f"| {r['op']} | {r['shape']} | {r['regime']} | {f(ours)} | "
                     f"{f(100 * r['bytes'] / (ours * 1e-6) / copy_bw) if ours else '-'} | "
                     f"{f(100 * r['frac_ceiling']) if 'frac_ceiling' in r else '-'} | {f(tf)} | {f(cub)} | "
                     f"{(cub / ours if cub and ours else float('nan')):.2f} | {f(i4)} | "
                     f"{(i4 / ours if i4 and ours else float('nan')):.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--summary")
    a = ap.parse_args()
    if a.sweep:
        res = sweep()
        out = os.environ.get("OUT", "/tmp")
        common.save_json(os.path.join(out, "quant_sweep.json"), res)
    if a.summary:
        print(summary(a.summary))
