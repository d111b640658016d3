"""Decode steps of a Llama-family model on MLX 4-bit or GGUF Q4_0 weights with and without
``LoadOptions.norm_handoff``.

The handoff (the default) gives each residual add + RMS norm after an o / down projection to the next
projection's launch (``kernels/norm_handoff.py``); without it the norm is launched. Oracle: the same weights
dequantized, fp32, on the reference path; the handoff's decode logits must sit within the error bar of the
two-op path in bf16.
"""

import contextlib

import pytest
import torch

import mlx_native as mn
from helpers import assert_error_bar, spy_plans
from mlx_native.formats.weights import AffineWeight, Checkpoint, DenseWeight, GGMLWeight
from mlx_native.models import LoadOptions, build_model
from mlx_native.ops.ggml import formats, q4_idot
from mlx_native.ops.quant import affine_idot

# hidden and intermediate sizes of 1024: the integer-dot mat-vec takes rows of whole 1024-value steps
CONFIG = dict(model_type="llama", vocab_size=96, hidden_size=1024, intermediate_size=1024, num_hidden_layers=2,
              num_attention_heads=8, num_key_value_heads=2, head_dim=128, rms_norm_eps=1e-5, rope_theta=10000.0,
              max_position_embeddings=64, tie_word_embeddings=False)
PROMPT, DECODE = 3, 1
QKV = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")


def _checkpoint(qkv_bits: int = 4) -> Checkpoint:
    g = torch.Generator().manual_seed(0)
    h, inter, kvd = CONFIG["hidden_size"], CONFIG["intermediate_size"], 2 * 128

    def mat(rows, cols, bits=4):
        wq, s, b = mn.quantize(torch.randn(rows, cols, generator=g) * 0.04, 64, bits)
        return AffineWeight(wq, s.to(torch.bfloat16), b.to(torch.bfloat16), 64, bits)

    def norm():
        return DenseWeight(torch.rand(h, generator=g) + 0.5)

    w = {"model.embed_tokens.weight": mat(CONFIG["vocab_size"], h), "lm_head.weight": mat(CONFIG["vocab_size"], h),
         "model.norm.weight": norm()}
    for layer in range(CONFIG["num_hidden_layers"]):
        p = f"model.layers.{layer}"
        w[f"{p}.input_layernorm.weight"] = norm()
        w[f"{p}.post_attention_layernorm.weight"] = norm()
        for n, (r, c) in {"self_attn.q_proj": (h, h), "self_attn.k_proj": (kvd, h), "self_attn.v_proj": (kvd, h),
                          "self_attn.o_proj": (h, h), "mlp.gate_proj": (inter, h), "mlp.up_proj": (inter, h),
                          "mlp.down_proj": (h, inter)}.items():
            w[f"{p}.{n}.weight"] = mat(r, c, qkv_bits if n in QKV else 4)
    return Checkpoint(path="<random>", format="synthetic", config=CONFIG, weights=w, metadata={}, tokenizer={})


def _decode_logits(ckpt, device, dtype, keep_quantized, ids, **opts) -> torch.Tensor:
    """Logits ``[DECODE, V]`` of the graph-safe decode steps after a reference-path prefill of the prompt."""
    model = build_model(ckpt, LoadOptions(torch.device(device), dtype, keep_quantized, **opts))
    out = []
    with torch.no_grad():
        cache = model.new_cache(1, 16)
        # the prefill is not what this tests (and slow in the interpreter)
        with mn.use_backend("reference") if device == "cpu" else contextlib.nullcontext():
            model.forward(ids[:, :PROMPT].to(device), cache, start=0)
        for i in range(DECODE):
            out.append(model.forward(ids[:, PROMPT + i:PROMPT + i + 1].to(device), cache).float().cpu())
    return torch.cat(out)


@pytest.fixture(scope="module")
def ckpt():
    return _checkpoint()


def test_decode_with_the_norm_handed_to_the_next_projection(ckpt, device, monkeypatch):
    if device == "cpu":  # fewer programs for the interpreter
        monkeypatch.setattr(affine_idot, "IDOT_BN", 32)
        monkeypatch.setattr(affine_idot, "IDOT_GLU_BN", 16)
    ids = torch.randint(0, CONFIG["vocab_size"], (1, PROMPT + DECODE), generator=torch.Generator().manual_seed(1))
    with mn.use_backend("reference"):
        oracle = _decode_logits(ckpt, "cpu", torch.float32, False, ids).double()
    base = _decode_logits(ckpt, device, torch.bfloat16, True, ids, norm_handoff=False)
    built = spy_plans(monkeypatch, affine_idot.AffineIdotLaunch)
    ours = _decode_logits(ckpt, device, torch.bfloat16, True, ids)
    kinds = [(p.launch.constexprs["NORM_OUT"], p.launch.constexprs["NORM_IN"], p.launch.constexprs["HAS_UP"])
             for p in built]
    # producers (o, down) and consumers (qkv; gate/up with the activation) were built
    assert {(True, False, False), (False, True, False), (False, True, True)} <= set(kinds), kinds
    assert_error_bar(ours, oracle, base, what="decode logits with the norm handoff")


def test_no_handoff_to_projections_that_cannot_take_it():
    """8-bit q/k/v (the integer-dot mat-vec takes 4-bit rows): the down projection launches the norm before
    them; the o projection still hands its norm to the 4-bit gate/up pair. Without a handoff nothing does."""
    model = build_model(_checkpoint(qkv_bits=8), LoadOptions(torch.device("cpu"), torch.bfloat16, True))
    assert model.handoff == [(False, True)] * CONFIG["num_hidden_layers"]
    model = build_model(_checkpoint(), LoadOptions(torch.device("cpu"), torch.bfloat16, True))
    assert model.handoff == [(True, True)] * CONFIG["num_hidden_layers"]
    model = build_model(_checkpoint(), LoadOptions(torch.device("cpu"), torch.float32, True))
    assert model.handoff == [(False, False)] * CONFIG["num_hidden_layers"], "fp32 activations: no integer dot"
    model = build_model(_checkpoint(), LoadOptions(torch.device("cpu"), torch.bfloat16, True, norm_handoff=False))
    assert model.handoff == [(False, False)] * CONFIG["num_hidden_layers"]


def _q4_0_blocks(rows: int, cols: int, g: torch.Generator) -> GGMLWeight:
    """Random Q4_0 blocks with small scales ``d`` (|w| ~ 0.02)."""
    t = formats.BY_NAME["Q4_0"]
    raw = torch.randint(0, 256, (rows * cols // 32, t.block_bytes), dtype=torch.uint8, generator=g)
    d = (torch.rand(raw.shape[0], 1, generator=g) * 4e-3 + 1e-3).to(torch.float16)
    raw[:, :2] = d.view(torch.uint8).view(-1, 2)
    return GGMLWeight(raw.reshape(rows, -1), t.id, "Q4_0", (rows, cols))


def _q4_0_checkpoint() -> Checkpoint:
    """:func:`_checkpoint`'s model on GGUF Q4_0 projections (dense embeddings and head)."""
    g = torch.Generator().manual_seed(0)
    ckpt = _checkpoint()
    w = dict(ckpt.weights)
    for name, weight in ckpt.weights.items():
        if isinstance(weight, AffineWeight):
            w[name] = DenseWeight(torch.randn(*weight.shape, generator=g) * 0.5) if "embed" in name or \
                "lm_head" in name else _q4_0_blocks(*weight.shape, g)
    return Checkpoint(path="<random>", format="synthetic", config=CONFIG, weights=w, metadata={}, tokenizer={})


def test_gguf_decode_with_the_norm_handed_to_the_next_projection(device, monkeypatch):
    """GGUF Q4_0 (the integer-dot kernels of Q4_0 / Q4_1 / Q4_K take the handoff): o / down hand their norm to the
    fused q/k/v and gate/up projections (the activation after)."""
    if device == "cpu":  # fewer programs for the interpreter
        monkeypatch.setattr(q4_idot, "Q4I_BN", 64)
    ckpt = _q4_0_checkpoint()
    ids = torch.randint(0, CONFIG["vocab_size"], (1, PROMPT + DECODE), generator=torch.Generator().manual_seed(1))
    with mn.use_backend("reference"):
        oracle = _decode_logits(ckpt, "cpu", torch.float32, False, ids).double()
    base = _decode_logits(ckpt, device, torch.bfloat16, True, ids, norm_handoff=False)
    built = spy_plans(monkeypatch, q4_idot.Q4IdotLaunch)
    model = build_model(ckpt, LoadOptions(torch.device(device), torch.bfloat16, True))
    assert model.handoff == [(True, True)] * CONFIG["num_hidden_layers"]
    ours = _decode_logits(ckpt, device, torch.bfloat16, True, ids)
    kinds = {(p.launch.constexprs["NORM_OUT"], p.launch.constexprs["NORM_IN"]) for p in built}
    assert {(True, False), (False, True)} <= kinds, kinds  # producers (o, down) and consumers (qkv, gate/up)
    assert_error_bar(ours, oracle, base, what="Q4_0 decode logits with the norm handoff")
