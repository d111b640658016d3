"""The sparse mixture-of-experts FFN block (Qwen3-MoE): router, top-k softmax routing, SwiGLU experts, weighted mix.

    out[t] = sum_j w[t, j] * down_e(silu(gate_e(x[t])) * up_e(x[t])),  e = ids[t, j]

The experts are stacked ``[E, out, in]`` in any weight kind, each run by the op made for it:

* MLX affine (mlx-lm's ``switch_mlp.{gate,up,down}_proj``): :func:`mn.moe_ffn` (route, gate/up, down and mix; one
  chain of three programmatic dependent launches at decode sizes), or the routing + :func:`mn.moe_qmm` when the
  three projections are quantized differently;
* GGUF blocks (``ffn_{gate,up,down}_exps``): :func:`mn.moe_ggml_ffn`;
* dense (Hugging Face's per-expert tensors, stacked at load; quantized experts dequantized on the CPU): the routing,
  then the routed rows as batched matmuls: gathered experts for decode-sized calls and during a CUDA-graph capture
  (no host sync), tokens grouped by expert otherwise.

The routing is :func:`mn.moe_router` on the router's matrix (the logits in the routing launch; the whole-step ops
take it as ``router_weight``), or :func:`mn.moe_route` on the logits of a router with a bias.
"""

from __future__ import annotations

import torch

import mlx_native as mn

from ..errors import FormatError
from ..formats.weights import AffineWeight, DenseWeight, GGMLWeight, Weight
from ..ops.activations.api import gated_mul

EXPERT_PARTS = ("gate_proj", "up_proj", "down_proj")


def router_matrix(router) -> torch.Tensor | None:
    """The ``[E, hidden]`` float matrix of a bias-free router :class:`~.base.Linear` (a quantized router dequantized
    once, to fp32: 1 MB a layer at 128 x 2048), which :func:`mn.moe_router` and the whole-step ops take; None for a
    router with a bias (its logits come from the projection)."""
    w = router.weight
    if router.bias is not None:
        return None
    if isinstance(w, DenseWeight):
        return w.data
    if isinstance(w, GGMLWeight):
        return mn.ggml_dequantize(w.raw, w.ggml_type, w.shape)
    return mn.dequantize(w.weight, w.scales.float(), w.biases.float(), w.group_size, w.bits)


def load_experts(ws, prefix: str, experts: int, hidden: int, inter: int) -> tuple[Weight, Weight, Weight]:
    """``(gate, up, down)`` of ``prefix`` (``model.layers.N.mlp``) stacked ``[E, inter, hidden]`` /
    ``[E, hidden, inter]`` and placed on the device, from whichever layout the checkpoint has: mlx-lm's
    ``switch_mlp.*``, the GGUF loader's ``experts.*`` stacks, or Hugging Face's ``experts.{e}.*`` matrices."""
    shapes = {"gate_proj": (experts, inter, hidden), "up_proj": (experts, inter, hidden),
              "down_proj": (experts, hidden, inter)}
    out = []
    for part in EXPERT_PARTS:
        for stack in (f"{prefix}.switch_mlp.{part}", f"{prefix}.experts.{part}"):
            if ws.has(f"{stack}.weight"):
                out.append(ws.placed(f"{stack}.weight", shapes[part]))
                break
        else:
            rows = [ws.raw(f"{prefix}.experts.{e}.{part}.weight", shapes[part][1:]) for e in range(experts)]
            if any(not isinstance(r, DenseWeight) for r in rows):
                raise FormatError(f"{ws.ckpt.path}: {prefix}.experts.*.{part}: per-expert matrices must be float "
                                  f"tensors (quantized experts come stacked)")
            out.append(DenseWeight(torch.stack([r.data.to(device=ws.opts.device, dtype=ws.opts.dtype)
                                                for r in rows])))
    return tuple(out)


class _AddNorm:
    """Stands where a dense MLP's down projection is: the MoE block's output is complete, so the residual add and
    the norm after it are :func:`mn.add_rms_norm` (the decoder calls ``mlp.down.matmul_add_rms_norm``)."""

    @staticmethod
    def matmul_add_rms_norm(y: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                            handoff: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        return mn.add_rms_norm(y, residual, weight, eps)


class SparseMoE:
    """The MoE FFN of one layer; the decoder uses it as a :class:`~.base.GatedMLP` (``hidden`` then ``down``).

    Args:
        router: the ``[E, hidden]`` router projection (``mlp.gate``).
        experts: ``(gate, up, down)`` as :func:`load_experts` returns them.
        top_k: experts per token; ``renormalize``: divide the chosen weights by their sum (``norm_topk_prob``).
    """

    GATHER_ROWS = 64  # dense experts: routed rows up to this are gathered (graph-safe), more are grouped by expert

    def __init__(self, router, experts: tuple[Weight, Weight, Weight], top_k: int, renormalize: bool,
                 activation: str = "silu"):
        kinds = {type(w) for w in experts}
        if len(kinds) != 1:
            raise FormatError(f"MoE experts mix weight kinds {sorted(k.__name__ for k in kinds)}; gate, up and down "
                              f"must all be dense, all GGUF blocks or all MLX affine")
        self.router = router
        self.router_weight = router_matrix(router)
        self.gate, self.up, self.down_w = experts
        self.top_k, self.renormalize, self.activation = top_k, renormalize, activation
        self.down = _AddNorm()

    @staticmethod
    def takes_handoff(dtype: torch.dtype) -> bool:
        """No: the router reads the normed rows first, so the decoder hands this block a tensor."""
        return False

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """The block's output ``[..., hidden]`` for ``x [..., hidden]``. The router's logits are computed in the
        routing launch (fp32, :func:`mn.moe_router`) unless the router has a bias."""
        rw = self.router_weight
        logits = self.router(x) if rw is None else None
        g, u, d = self.gate, self.up, self.down_w
        kw = dict(activation=self.activation, renormalize=self.renormalize, router_weight=rw)
        if isinstance(g, GGMLWeight):
            return mn.moe_ggml_ffn(x, logits, self.top_k, (g.raw, g.ggml_type), (u.raw, u.ggml_type),
                                   (d.raw, d.ggml_type), **kw)
        if isinstance(g, AffineWeight) and g.scheme == u.scheme == d.scheme:
            return mn.moe_ffn(x, logits, self.top_k, g.tensors, u.tensors, d.tensors, group_size=g.group_size,
                              bits=g.bits, **kw)
        x2 = x.reshape(-1, x.shape[-1])
        if rw is None:
            ids, w = mn.moe_route(logits.reshape(x2.shape[0], -1), self.top_k, renormalize=self.renormalize)
        else:
            ids, w = mn.moe_router(x2, rw, self.top_k, renormalize=self.renormalize)
        if isinstance(g, AffineWeight):
            y = self._affine(x2, ids, w)
        else:
            y = mn.moe_weighted_reduce(self._dense(x2, ids), w)
        return y.reshape(x.shape)

    def _affine(self, x2: torch.Tensor, ids: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """Experts quantized differently (mlx-lm's per-module overrides): the routed ops one by one."""
        g, u, d = self.gate, self.up, self.down_w
        if g.scheme == u.scheme:
            h = mn.moe_qmm(x2, ids, *g.tensors, group_size=g.group_size, bits=g.bits, w_up=u.weight,
                           scales_up=u.scales, biases_up=u.biases, activation=self.activation)
        else:
            h = gated_mul(mn.moe_qmm(x2, ids, *g.tensors, group_size=g.group_size, bits=g.bits),
                          mn.moe_qmm(x2, ids, *u.tensors, group_size=u.group_size, bits=u.bits), self.activation)
        return mn.moe_qmm(h, ids, *d.tensors, group_size=d.group_size, bits=d.bits, topk_weights=w)

    def _dense(self, x2: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Each routed row through its expert: ``[T, k, hidden]`` for ``x2 [T, hidden]``, ``ids [T, k]``."""
        t, k = ids.shape
        g, u, d = self.gate.data, self.up.data, self.down_w.data
        flat = ids.reshape(-1).long()
        rows = x2.repeat_interleave(k, 0)  # [T k, hidden], slot-major per token
        capturing = x2.is_cuda and torch.cuda.is_current_stream_capturing()
        if t * k <= self.GATHER_ROWS or capturing:
            h = gated_mul(torch.bmm(g[flat], rows[:, :, None])[..., 0], torch.bmm(u[flat], rows[:, :, None])[..., 0],
                          self.activation)
            return torch.bmm(d[flat], h[:, :, None])[..., 0].view(t, k, -1)
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=g.shape[0]).tolist()  # host sync: not in decode-sized calls
        xs, ys = rows[order], torch.empty_like(rows)
        start = 0
        for e, n in enumerate(counts):
            if n:
                xe = xs[start:start + n]
                h = gated_mul(xe @ g[e].T, xe @ u[e].T, self.activation)
                ys[order[start:start + n]] = h @ d[e].T
            start += n
        return ys.view(t, k, -1)
