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
    ("silu_mul", lambda g, u: mn.silu_mul(g, u), lambda d: (torch.randn(4, 100, device=d), torch.randn(4, 100, device=d))),
    ("gelu_mul", lambda g, u: mn.gelu_mul(g, u, "none"),
     lambda d: (torch.randn(4, 100, device=d), torch.randn(4, 100, device=d))),
    ("sigmoid_mul", lambda x, g: mn.sigmoid_mul(x, g),
     lambda d: (torch.randn(4, 100, device=d), torch.randn(4, 100, device=d))),
    ("softcap", lambda x: mn.softcap(x, 30.0), lambda d: (torch.randn(4, 100, device=d) * 50,)),
    ("softmax", lambda x: mn.softmax(x, 0), lambda d: (torch.randn(7, 100, device=d),)),
]

CASE_IDS = [c[0] for c in CASES]
