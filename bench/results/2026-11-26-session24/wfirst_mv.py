"""One-row integer-dot mat-vecs (MLX 4-bit g64, GGUF Q4_K, Q4_0) as programmatic dependents in a CUDA-graph chain,
with their first weights loaded before ``griddepcontrol.wait`` (``WEIGHTS_BEFORE_WAIT``) or after it, A/B in one
process (interleaved rounds, L2 rotated over weight sets); outputs compared bit for bit.

    python3 wfirst_mv.py    (repo root, PYTHONPATH=src)"""
import sys

import torch

sys.path.insert(0, "bench")
from common import copy_bandwidth, time_graph_rounds  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.kernels import dependent  # noqa: E402
from mlx_native.ops.ggml import q4_idot, q4k_idot  # noqa: E402
from mlx_native.ops.quant import affine_idot  # noqa: E402

dev, bf = "cuda", torch.bfloat16
SETS = 4


def weights(name, n, k):
    if name == "mlx":
        out = []
        for _ in range(SETS):
            w, s, b = mn.quantize(torch.randn(n, k, dtype=bf, device=dev) * 0.02, 64, 4)
            out.append((w.view(torch.int32), s, b))
        return out
    import gguf
    bs, ts = gguf.GGML_QUANT_SIZES[getattr(gguf.GGMLQuantizationType, name)]
    out = []
    for _ in range(SETS):
        raw = torch.randint(0, 256, (n * k // bs * ts,), dtype=torch.uint8, device=dev)
        blocks = raw.view(-1, ts)
        if name == "Q4_0":
            blocks[:, :2] = torch.tensor([0x00, 0x20], dtype=torch.uint8, device=dev)  # d = 2^-7 (fp16 0x2000)
        else:
            blocks[:, :4] = torch.tensor([0x00, 0x20, 0x00, 0x20], dtype=torch.uint8, device=dev)  # d, dmin
        out.append((raw,))
    return out


def plan(name, n, k):
    if name == "mlx":
        return affine_idot.AffineIdotLaunch(n, k, 64, bf, dev)
    if name == "Q4_K":
        return q4k_idot.Q4kIdotLaunch(n, k, bf, dev)
    return q4_idot.Q4IdotLaunch(2, n, k, bf, dev)


if __name__ == "__main__":
    bw = copy_bandwidth()
    print(torch.cuda.get_device_name(), f"copy {bw / 1e12:.3f} TB/s", flush=True)
    x = torch.randn(1, 4096 * 4, dtype=bf, device=dev)
    for name in ("mlx", "Q4_K", "Q4_0"):
        for n, k in ((4096, 4096), (14336, 4096), (4096, 14336)):
            ws = weights(name, n, k)
            plans = {}
            for flag in (False, True):
                dependent.WEIGHTS_BEFORE_WAIT = flag
                plans[flag] = plan(name, n, k)
            dependent.WEIGHTS_BEFORE_WAIT = False
            xk = x[:, :k].contiguous()
            same = torch.equal(plans[False](xk, *ws[0]), plans[True](xk, *ws[0]))
            t = time_graph_rounds({f: (lambda w, p=p: p(xk, *w)) for f, p in plans.items()}, [(w,) for w in ws], 3)
            nbytes = sum(v.numel() * v.element_size() for v in ws[0])
            print(f"{name} M1 {n}x{k}: after wait {t[False]:.2f} us ({nbytes / t[False] / 1e6 / bw * 1e12:.1%} of copy),"
                  f" before {t[True]:.2f} us ({nbytes / t[True] / 1e6 / bw * 1e12:.1%}), {t[False] / t[True]:.3f}x;"
                  f" bit-equal {same}", flush=True)
