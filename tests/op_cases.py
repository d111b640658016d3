"""One representative call of every public op, for registration / compile / graph tests.

Each case: (name, public function, builder of its arguments on a device).
"""

from __future__ import annotations

import torch

import mlx_native as mn


def _norm_args(device, dtype=torch.bfloat16):
    return (torch.randn(5, 96, device=device, dtype=dtype), torch.randn(96, device=device, dtype=dtype))


CASES = [
    ("rms_norm", lambda x, w: mn.rms_norm(x, w, 1e-6), _norm_args),
    ("rms_norm_gemma", lambda x, w: mn.rms_norm(x, w, 1e-6, weight_offset=1.0), _norm_args),
    ("add_rms_norm", lambda x, r, w: mn.add_rms_norm(x, r, w, 1e-6),
     lambda d: (torch.randn(5, 96, device=d), torch.randn(5, 96, device=d), torch.randn(96, device=d))),
    ("l2_norm", lambda x: mn.l2_norm(x), lambda d: (torch.randn(3, 64, device=d),)),
    ("rope", lambda x: mn.rope(x, 64, offset=5), lambda d: (torch.randn(1, 4, 6, 64, device=d),)),
    ("rope_positions", lambda x, p: mn.rope(x, 32, traditional=True, positions=p),
     lambda d: (torch.randn(2, 6, 4, 64, device=d), torch.randint(0, 99, (2, 6, 1), device=d))),
    ("rope_offset_tensor", lambda x, o: mn.rope(x, 64, offset=o),
     lambda d: (torch.randn(2, 4, 3, 64, device=d), torch.tensor([3, 8], device=d))),
    ("rope_multi", lambda x, p: mn.rope_multi(x, 64, p, [8, 12, 12]),
     lambda d: (torch.randn(1, 4, 6, 64, device=d), torch.randint(0, 99, (3, 1, 1, 6), device=d))),
    ("head_norm_rope", lambda x, w, p: mn.head_norm_rope(x, w, positions=p, dims=64),
     lambda d: (torch.randn(2, 3, 4, 128, device=d), torch.randn(128, device=d), torch.randint(0, 99, (2, 3), device=d))),
    ("rope_qk", lambda q, k, p: mn.rope_qk(q, k, 64, positions=p),
     lambda d: (torch.randn(5, 8, 64, device=d), torch.randn(5, 2, 64, device=d), torch.randint(0, 99, (5, 1), device=d))),
    ("head_norm_rope_qk", lambda q, k, qw, kw, p: mn.head_norm_rope_qk(q, k, qw, kw, positions=p),
     lambda d: (torch.randn(3, 8, 128, device=d), torch.randn(3, 2, 128, device=d), torch.randn(128, device=d),
                torch.randn(128, device=d), torch.randint(0, 99, (3,), device=d))),
    ("silu_mul", lambda g, u: mn.silu_mul(g, u), lambda d: (torch.randn(4, 100, device=d), torch.randn(4, 100, device=d))),
    ("gelu_mul", lambda g, u: mn.gelu_mul(g, u, "none"),
     lambda d: (torch.randn(4, 100, device=d), torch.randn(4, 100, device=d))),
    ("sigmoid_mul", lambda x, g: mn.sigmoid_mul(x, g),
     lambda d: (torch.randn(4, 100, device=d), torch.randn(4, 100, device=d))),
    ("softcap", lambda x: mn.softcap(x, 30.0), lambda d: (torch.randn(4, 100, device=d) * 50,)),
    ("softmax", lambda x: mn.softmax(x, 0), lambda d: (torch.randn(7, 100, device=d),)),
    ("flash_attn_prefill",
     lambda q, k, v, m: mn.flash_attn_prefill(q, k, v, causal=True, mask=m, softcap=30.0, return_lse=True),
     lambda d: (torch.randn(1, 4, 33, 64, device=d, dtype=torch.bfloat16),
                torch.randn(1, 2, 40, 64, device=d, dtype=torch.bfloat16),
                torch.randn(1, 2, 40, 64, device=d, dtype=torch.bfloat16), torch.rand(33, 40, device=d) > 0.2)),
    ("flash_attn_decode", lambda q, kc, vc, n: mn.flash_attn_decode(q, kc, vc, n, window=16),
     lambda d: (torch.randn(2, 8, 1, 64, device=d, dtype=torch.bfloat16),
                torch.randn(2, 2, 48, 64, device=d, dtype=torch.bfloat16),
                torch.randn(2, 2, 48, 64, device=d, dtype=torch.bfloat16),
                torch.randint(1, 200, (2,), device=d, dtype=torch.int32))),
    ("flash_attn_decode_append",  # rope + cache write + attention in one launch; same slots on every call
     lambda q, kc, vc, n, kn, vn: (mn.flash_attn_decode(q, kc, vc, n, k_new=kn, v_new=vn, window=16,
                                                        rope=mn.RopeSpec(32, base=500.0)), kc, vc),
     lambda d: (torch.randn(2, 8, 1, 64, device=d, dtype=torch.bfloat16),
                torch.randn(2, 2, 48, 64, device=d, dtype=torch.bfloat16),
                torch.randn(2, 2, 48, 64, device=d, dtype=torch.bfloat16),
                torch.randint(0, 200, (2,), device=d, dtype=torch.int32),
                torch.randn(2, 2, 1, 64, device=d, dtype=torch.bfloat16),
                torch.randn(2, 2, 1, 64, device=d, dtype=torch.bfloat16))),
    ("kv_cache_write",  # advance=False: repeated calls on the same inputs write the same slots
     lambda kc, vc, n, kn, vn: (mn.kv_cache_write(kc, vc, n, kn, vn, ring=True, advance=False), kc, vc)[1:],
     lambda d: (torch.randn(2, 2, 16, 64, device=d), torch.randn(2, 2, 16, 64, device=d),
                torch.randint(0, 100, (2,), device=d, dtype=torch.int32), torch.randn(2, 2, 5, 64, device=d),
                torch.randn(2, 2, 5, 64, device=d))),
]


# --- quantization (MLX affine, GGUF blocks) and MoE ---------------------------------

def _qweight(d, *lead, n=40, k=128, gs=64, bits=4):
    wq, s, b = mn.quantize(torch.randn(*lead, n, k) * 0.05, gs, bits)
    return wq.view(torch.int32).to(d), s.to(d), b.to(d)  # int32 storage: copy_ works everywhere


def _q8_0_raw(d, rows, k):
    blocks = torch.randint(0, 256, (rows * k // 32, 34), dtype=torch.uint8)
    blocks[:, :2] = torch.full((rows * k // 32, 1), 0.01, dtype=torch.float16).view(torch.uint8)
    return blocks.reshape(-1).to(d)


CASES += [
    ("quantize", lambda w: mn.quantize(w, 64, 4), lambda d: (torch.randn(8, 128, device=d),)),
    ("dequantize", lambda w, s, b: mn.dequantize(w, s, b, 64, 4), lambda d: _qweight(d)),
    ("quantized_matmul", lambda x, w, s, b: mn.quantized_matmul(x, w, s, b, True, 64, 4),
     lambda d: (torch.randn(3, 128, device=d, dtype=torch.bfloat16), *_qweight(d))),
    ("quantized_matmul_prefill", lambda x, w, s, b: mn.quantized_matmul(x, w, s, b, True, 64, 4),
     lambda d: (torch.randn(40, 128, device=d), *_qweight(d))),
    ("gather_qmm", lambda x, w, s, b, i: mn.gather_qmm(x, w, s, b, rhs_indices=i),
     lambda d: (torch.randn(3, 1, 1, 128, device=d), *_qweight(d, 4), torch.randint(0, 4, (3, 2), device=d))),
    ("quantized_embedding", lambda i, w, s, b: mn.quantized_embedding(i, w, s, b, 64, 4),
     lambda d: (torch.randint(0, 40, (2, 3), device=d), *_qweight(d))),
    ("ggml_dequantize", lambda r: mn.ggml_dequantize(r, "Q8_0", (6, 64)), lambda d: (_q8_0_raw(d, 6, 64),)),
    ("ggml_matmul", lambda x, r: mn.ggml_matmul(x, r, "Q8_0", (6, 64)),
     lambda d: (torch.randn(2, 64, device=d), _q8_0_raw(d, 6, 64))),
    ("ggml_embedding", lambda i, r: mn.ggml_embedding(i, r, "Q8_0", (6, 64)),
     lambda d: (torch.randint(0, 6, (2, 3), device=d), _q8_0_raw(d, 6, 64))),
    ("moe_route", lambda z: mn.moe_route(z, 4), lambda d: (torch.randn(3, 16, device=d),)),
    ("moe_router", lambda x, r: mn.moe_router(x, r, 4),
     lambda d: (torch.randn(3, 64, device=d, dtype=torch.bfloat16), torch.randn(16, 64, device=d))),
    ("moe_qmm", lambda x, i, w, s, b: mn.moe_qmm(x, i, w, s, b, w_up=w, scales_up=s, biases_up=b),
     lambda d: (torch.randn(3, 128, device=d), torch.randint(0, 4, (3, 2), device=d, dtype=torch.int32),
                *_qweight(d, 4))),
    ("moe_ggml_matmul", lambda x, i, r: mn.moe_ggml_matmul(x, i, r, "Q8_0", (3, 6, 64)),
     lambda d: (torch.randn(2, 2, 64, device=d), torch.randint(0, 3, (2, 2), device=d, dtype=torch.int32),
                _q8_0_raw(d, 18, 64))),
    ("moe_ffn", lambda x, z, gw, gs, gb, dw, ds, db: mn.moe_ffn(x, z, 2, (gw, gs, gb), (gw, gs, gb), (dw, ds, db)),
     lambda d: (torch.randn(3, 128, device=d, dtype=torch.bfloat16), torch.randn(3, 4, device=d),
                *_qweight(d, 4, n=64), *_qweight(d, 4, n=128, k=64))),
    ("moe_weighted_reduce", lambda y, w: mn.moe_weighted_reduce(y, w),
     lambda d: (torch.randn(3, 4, 100, device=d), torch.rand(3, 4, device=d))),
    ("argmax", lambda x: mn.argmax(x), lambda d: (torch.randn(3, 1000, device=d),)),
    ("argmax_out", lambda x, o: (mn.argmax(x, out=o), o)[1:],
     lambda d: (torch.randn(3, 1000, device=d), torch.zeros(3, dtype=torch.int64, device=d))),
    ("sample", lambda x, s: mn.sample(x, temperature=0.8, top_k=50, top_p=0.9, min_p=0.01, seed=s),
     lambda d: (torch.randn(3, 1000, device=d) * 3, torch.tensor([5], device=d))),
]

CASE_IDS = [c[0] for c in CASES]
