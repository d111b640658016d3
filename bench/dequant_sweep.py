"""Dequantize throughput: ``ggml_dequantize`` per GGUF type and ``dequantize`` (MLX affine) per bit width, to bf16.

    python bench/dequant_sweep.py [--types Q4_0,Q8_0,Q4_K,Q5_K,Q6_K] [--bits 4,8] [--out FILE.json]

Shapes: a dense matrix (14336 x 4096) and a stack of 128 experts' down projections (128 x 2048 x 768: Qwen3-30B-A3B,
rows of 768 values, three K-quant super-blocks, not 4-byte aligned in Q6_K). Each row reports the bytes moved (blocks
read + bf16 written) per second and as a fraction of the measured copy bandwidth (read + write counted as the copy
is). These kernels feed the chunked prefill (``qmm.ChunkedPrefill``: dequantize, then cuBLAS) and the MoE experts of
formats without a grouped kernel (``moe/grouped.py``). CUDA-graph replay.
"""

from __future__ import annotations

import argparse
import os
import sys

import gguf
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from quant import affine_weight, gguf_raw  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.ggml import formats  # noqa: E402

DT = torch.bfloat16
SHAPES = {"dense 14336x4096": (1, 14336, 4096), "experts 128x2048x768": (128, 2048, 768)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--types", default="Q4_0,Q8_0,Q4_K,Q5_K,Q6_K")
    ap.add_argument("--bits", default="4,8")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "dequant_sweep.json"))
    a = ap.parse_args()
    copy_bw = common.copy_bandwidth()
    print(f"copy bandwidth {copy_bw / 1e12:.3f} TB/s", flush=True)
    rows = []

    def report(label, fmt, fn, sets, read_bytes, numel):
        t = common.time_any(fn, sets)
        moved = read_bytes + 2 * numel
        rows.append(dict(shape=label, format=fmt, us=t, bytes=moved, frac_copy=moved / (t * 1e-6) / copy_bw))
        print(f"{label:22s} {fmt:8s} {t:9.2f} us  {moved / (t * 1e-6) / 1e12:6.3f} TB/s  "
              f"{100 * moved / (t * 1e-6) / copy_bw:5.1f}% of copy", flush=True)

    for label, (lead, n, k) in SHAPES.items():
        shape = (lead * n, k)
        for name in a.types.split(","):
            t = formats.BY_NAME[name]
            raw = gguf_raw(name, n, k, lead)
            head = raw[: 64 * formats.row_bytes(t, k)].cpu().numpy()
            want = torch.from_numpy(gguf.quants.dequantize(head, gguf.GGMLQuantizationType(t.id))).reshape(64, k)
            got = mn.ggml_dequantize(raw, name, shape, dtype=torch.float32)[:64].cpu()
            if not torch.equal(got, want):
                raise RuntimeError(f"{name}: dequantize differs from gguf.quants")
            report(label, name, lambda r: mn.ggml_dequantize(r, name, shape, dtype=DT), [(raw,)], raw.numel(),
                   lead * n * k)
        for bits in (int(b) for b in a.bits.split(",")):
            wq, s, b = affine_weight(n, k, 64, bits, lead=(lead,) if lead > 1 else ())
            report(label, f"MLX {bits}b", lambda w, sc, bi: mn.dequantize(w, sc, bi, 64, bits), [(wq, s, b)],
                   wq.numel() * 4 + 2 * s.numel() * 2, lead * n * k)
    common.save_json(a.out, dict(environment=common.environment(), copy_bandwidth=copy_bw, rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
