"""Which one-row / few-row streamed mat-vec launches split K into one-step programs (split == steps > 1) on common
model shapes, offline (plans built for an H100: 132 SMs)."""
import sys
sys.path.insert(0, "scripts"); sys.path.insert(0, "tests"); sys.path.insert(0, "tests/ops")
import numpy as np, torch
import cbank_lines as cb
cb._h100()
import mlx_native as mn
from mlx_native.kernels import launch as launch_mod
from mlx_native.ops.quant import affine_mv
from mlx_native.runtime import plans
from test_ggml import valid_blocks, raw_tensor

seen = []
orig = affine_mv.split_count
def spy(steps, tiles, target):
    r = orig(steps, tiles, target)
    seen.append((steps, tiles, target, r))
    return r
affine_mv.split_count = spy
bf = torch.bfloat16
rng = np.random.default_rng(0)
shapes = [(11008, 4096), (4096, 11008), (5376, 4096), (18944, 3584), (3584, 18944), (9728, 2560), (2560, 9728),
          (13824, 5120), (5120, 13824), (12288, 4096), (10240, 2560), (1536, 576), (576, 1536), (14336, 4096),
          (4096, 14336), (8960, 1536), (1536, 8960), (4864, 896), (896, 4864)]
for m in (1, 4):
    for (k, n) in shapes:
        for fmt in ("mlx3", "mlx4", "mlx6", "mlx8", "Q4_0", "Q4_K", "Q5_K", "Q6_K", "Q8_0"):
            seen.clear(); plans.clear_all()
            try:
                if fmt.startswith("mlx"):
                    bits = int(fmt[3:])
                    wq = mn.quantize(torch.randn(n, k, dtype=bf) * 0.02, 64, bits)
                    fn = lambda: mn.quantized_matmul(torch.randn(m, k, dtype=bf), *wq, group_size=64, bits=bits)
                else:
                    if k % 256 and fmt.endswith("K"):
                        continue
                    raw = raw_tensor(valid_blocks(fmt, n, k, rng), "cpu")
                    fn = lambda: mn.ggml_matmul(torch.randn(m, k, dtype=bf), raw, fmt, (n, k))
                with launch_mod.recording(run=False) as rec:
                    fn()
            except Exception as exc:
                print(m, fmt, k, n, "ERR", repr(exc)[:100]); continue
            kern = ",".join(ln.kernel.fn.__name__ for ln, _ in rec)
            bad = [s for s in seen if s[3] == s[0] > 1]
            if bad:
                print(f"M{m} {fmt:5s} K {k:6d} N {n:6d} {kern}: steps/tiles/target/split {bad}")
