"""Session 42: mmv.balanced_split against split_rule (argv[1] "new" / "old": mmv.BALANCED_SPLIT_ROWS) for 2-16 rows
of MLX g64 and GGUF Q4_K / Q4_0 / Q4_1 decode, 3 shapes; prints the plans' splits. CUDA-graph replay, 4 weight sets."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import common  # noqa: E402
from quant import affine_weight, gguf_raw  # noqa: E402
import mlx_native as mn  # noqa: E402
from mlx_native.ops.quant import mmv  # noqa: E402

mmv.BALANCED_SPLIT_ROWS = sys.argv[1] == "new"
splits = []
orig = mmv.MmvLaunch.__init__


def spy(self, *a, **kw):
    orig(self, *a, **kw)
    splits.append(self.split)


mmv.MmvLaunch.__init__ = spy
for k, n in ((4096, 14336), (14336, 4096), (4096, 4096)):
    for fmt in ("MLX", "Q4_K", "Q4_0", "Q4_1"):
        ws = [affine_weight(n, k) if fmt == "MLX" else gguf_raw(fmt, n, k) for _ in range(4)]
        for m in (2, 4, 8, 16):
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            if fmt == "MLX":
                fn = lambda x, w: mn.quantized_matmul(x, *w, group_size=64)  # noqa: E731
            else:
                fn = lambda x, w, fmt=fmt: mn.ggml_matmul(x, w, fmt, (n, k))  # noqa: E731
            del splits[:]
            t = common.time_graph(fn, [(x, w) for w in ws], 50)
            print(f"{sys.argv[1]} K{k} N{n} {fmt:4s} M{m:2d}: {t:7.2f} us  mmv splits {sorted(set(splits))}",
                  flush=True)
