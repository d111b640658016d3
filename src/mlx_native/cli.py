"""The ``mlx-native`` command line.

    mlx-native demo      run each op family on random data (Triton kernels on a
                         GPU, the PyTorch reference on the CPU) and check it
                         against the fp64 reference
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from . import errors


def _demo(args: argparse.Namespace) -> int:
    import mlx_native as mn
    from .ops.activations import ref as act_ref
    from .ops.norms import ref as norm_ref
    from .ops.rope import ref as rope_ref

    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    g = torch.Generator().manual_seed(args.seed)
    x = torch.randn(args.tokens, args.hidden, generator=g).to(device, dtype)
    w = torch.randn(args.hidden, generator=g).to(device, dtype)
    q = torch.randn(args.tokens, args.hidden // 128, 128, generator=g).to(device, dtype)
    pos = torch.arange(args.tokens, device=device)
    checks = [
        ("rms_norm", lambda: mn.rms_norm(x, w), lambda: norm_ref.rms_norm(x.double(), w.double(), 1e-6)),
        ("add_rms_norm", lambda: mn.add_rms_norm(x, x, w)[0],
         lambda: norm_ref.rms_norm((x.double() * 2), w.double(), 1e-6)),
        ("head_norm_rope", lambda: mn.head_norm_rope(q, w[:128], positions=pos),
         lambda: rope_ref.head_norm_rope(q.double(), w[:128].double(), 1e-6, 0.0, 128, 10000.0, 1.0, pos, False)),
        ("silu_mul", lambda: mn.silu_mul(x, w.expand_as(x)), lambda: act_ref.silu_mul(x.double(), w.double())),
        ("softmax", lambda: mn.softmax(x), lambda: torch.softmax(x.double(), -1)),
    ]
    print(f"mlx-native demo on {device} ({mn.current_backend()} backend), x: {tuple(x.shape)} {dtype}")
    for name, ours, oracle in checks:
        t0 = time.perf_counter()
        out = ours()
        if device == "cuda":
            torch.cuda.synchronize()
        dt = (time.perf_counter() - t0) * 1e3
        err = (out.double() - oracle()).abs().max().item()
        print(f"  {name:15s} max |err| vs fp64 = {err:.2e}   ({dt:.2f} ms)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mlx-native", description="Fused GPU kernels for LLM inference.")
    parser.add_argument("--verbose", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the op families once and check them against fp64")
    demo.add_argument("--tokens", type=int, default=8)
    demo.add_argument("--hidden", type=int, default=1024)
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except errors.MlxError as exc:
        if args.verbose:
            raise
        print(f"mlx-native: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
