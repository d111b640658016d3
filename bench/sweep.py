"""Launch-config sweeps (developer tool; results go to bench/NOTES.md).

    python bench/sweep.py [--only TITLE_SUBSTRING ...]

Each sweep varies module-level launch constants of one kernel module, times
ours on a few shapes (CUDA-graph replay, rotating inputs), and prints every
setting with the best one first. Plan caches are cleared between settings.
The "decode peers" sweep times Liger-Kernel and torch.compile on the decode
shapes of the other sweeps (no constants), so one log compares them.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import mlx_native as mn  # noqa: E402
from mlx_native.ops.activations import elementwise  # noqa: E402
from mlx_native.ops.norms import kernel as norm_kernel  # noqa: E402
from mlx_native.ops.rope import kernel as rope_kernel  # noqa: E402
from mlx_native.runtime.plans import clear_all  # noqa: E402
from peers import compiled, cos_sin, liger, torch_rms_norm, torch_rope  # noqa: E402

BF16 = torch.bfloat16


def _rand(*shape):
    return torch.randn(*shape, device="cuda", dtype=BF16)


def hnr(tokens, heads, dim):
    def make():
        return _rand(tokens, heads, dim), _rand(dim), torch.arange(tokens, device="cuda")
    return make, (lambda x, w, p: mn.head_norm_rope(x, w, positions=p)), 4 * tokens * heads * dim


def rope_qk(batch, seq, hq, hkv, dim, with_positions=True):
    """``with_positions=False``: MLX offset mode (no position tensor to load before the angles)."""
    def make():
        return _rand(batch, seq, hq, dim), _rand(batch, seq, hkv, dim), torch.arange(seq, device="cuda")[:, None]
    if with_positions:
        return make, (lambda q, k, p: mn.rope_qk(q, k, dim, positions=p)), 4 * batch * seq * (hq + hkv) * dim
    return make, (lambda q, k, p: mn.rope_qk(q.transpose(1, 2), k.transpose(1, 2), dim, offset=1000)), \
        4 * batch * seq * (hq + hkv) * dim


def rope_qk_peer(batch, seq, hq, hkv, dim, fn):
    """A peer's rope on q/k ``[B, H, L, D]`` (physical ``[B, L, H, D]``) with cos/sin tables ``[1, L, D]``."""
    def make():
        pos = torch.arange(seq, device="cuda") + 1000
        return (_rand(batch, seq, hq, dim).transpose(1, 2), _rand(batch, seq, hkv, dim).transpose(1, 2),
                *cos_sin(pos, dim, 1e4, BF16))
    return make, fn, 4 * batch * seq * (hq + hkv) * dim


def add_rms(rows, cols):
    def make():
        return _rand(rows, cols), _rand(rows, cols), _rand(cols)
    return make, (lambda x, r, w: mn.add_rms_norm(x, r, w)), 8 * rows * cols


def _decode_peers() -> dict:
    """Liger-Kernel and torch.compile on the decode shapes of the rope and norm sweeps."""
    lig = liger() or {}
    shapes = {}
    rope_peers = {"compile": compiled(torch_rope)}
    if "rope" in lig:
        rope_peers["liger"] = lig["rope"]
    for name, fn in rope_peers.items():
        for b, l in ((1, 1), (8, 1), (1, 16)):
            shapes[f"{name} rope_qk B{b} L{l} 32/8 D128"] = rope_qk_peer(b, l, 32, 8, 128, fn)
    rms_peers = {"compile": compiled(lambda x, w: torch_rms_norm(x, w, 1e-6))}
    if "rms_norm" in lig:
        rms_peers["liger"] = lambda x, w: lig["rms_norm"](x, w, 1e-6)
    for name, fn in rms_peers.items():
        for rows, cols in ((1, 576), (1, 4096)):
            shapes[f"{name} rms {rows}x{cols}"] = rms(rows, cols, fn)
    return shapes


def silu(rows, cols):
    def make():
        return _rand(rows, cols), _rand(rows, cols)
    return make, mn.silu_mul, 6 * rows * cols


def rms(rows, cols, fn=lambda x, w: mn.rms_norm(x, w)):
    """rms_norm of ``[rows, cols]`` (ours, or a peer's ``fn(x, w)``)."""
    def make():
        return _rand(rows, cols), _rand(cols)
    return make, fn, 4 * rows * cols


NORM_SHAPES = {"rms 1x576": rms(1, 576), "add_rms 1x576": add_rms(1, 576), "rms 1x4096": rms(1, 4096),
               "rms 16x8192": rms(16, 8192), "rms 16384x4096": rms(16384, 4096)}

SWEEPS = [
    ("rope small problems", rope_kernel, ("SMALL_ROWS", "SMALL_ELEMS_PER_THREAD"), ([4, 8, 16], [4, 8, 16]),
     {"hnr T1 H32 D128": hnr(1, 32, 128), "hnr T4 H16 D256": hnr(4, 16, 256), "hnr T16 H32 D128": hnr(16, 32, 128),
      "rope_qk B1 L1 32/8 D128": rope_qk(1, 1, 32, 8, 128), "rope_qk B8 L1 32/8 D128": rope_qk(8, 1, 32, 8, 128),
      "rope_qk B1 L16 32/8 D128": rope_qk(1, 16, 32, 8, 128),
      "rope_qk B8 L1 offset mode": rope_qk(8, 1, 32, 8, 128, with_positions=False),
      "rope_qk B1 L16 offset mode": rope_qk(1, 16, 32, 8, 128, with_positions=False)}),
    ("rope sincos", rope_kernel, ("POLY_SINCOS",), ([True, False],),
     {"rope_qk B1 L1 32/8 D128": rope_qk(1, 1, 32, 8, 128), "rope_qk B8 L1 32/8 D128": rope_qk(8, 1, 32, 8, 128),
      "rope_qk B1 L16 32/8 D128": rope_qk(1, 16, 32, 8, 128), "hnr T4 H16 D256": hnr(4, 16, 256),
      "hnr T16 H32 D128": hnr(16, 32, 128), "hnr T8192 H32 D256": hnr(8192, 32, 256),
      "rope_qk B4 L4096 32/8 D128": rope_qk(4, 4096, 32, 8, 128)}),
    ("rope large problems", rope_kernel, ("LARGE_GROUP", "ELEMS_PER_THREAD"), ([8, 16, 32], [16, 32]),
     {"hnr T8192 H32 D256": hnr(8192, 32, 256), "rope_qk B4 L4096 32/8 D128": rope_qk(4, 4096, 32, 8, 128)}),
    ("elementwise small problems", elementwise, ("MIN_TILE_ELEMS", "NUM_WARPS"), ([256, 512, 1024, 2048], [2, 4, 8]),
     {"silu 1x8960": silu(1, 8960), "silu 4x14336": silu(4, 14336), "silu 16x14336": silu(16, 14336)}),
    ("norm", norm_kernel, ("ELEMS_PER_THREAD",), ([2, 4, 8, 16, 32],), NORM_SHAPES),
    ("norm lean rows", norm_kernel, ("LEAN_ROWS",), ([True, False],), NORM_SHAPES),
    ("decode peers", None, (), (), None),
]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=[], help="run the sweeps whose title contains one of these")
    args = parser.parse_args(argv)
    for title, module, names, values, shapes in SWEEPS:
        if args.only and not any(o in title for o in args.only):
            continue
        shapes = shapes if shapes is not None else _decode_peers()
        saved = [getattr(module, n) for n in names]
        print(f"\n== {title}: {' x '.join(names)} (default {saved}) ==", flush=True)
        for label, (make, fn, nbytes) in shapes.items():
            sets = [make() for _ in range(max(1, min(32, (256 << 20) // nbytes)))]
            results = []
            for setting in itertools.product(*values):
                for n, v in zip(names, setting):
                    setattr(module, n, v)
                clear_all()
                t = common.time_graph(fn, sets, reps=10) or common.time_eager(fn, sets, reps=10)
                results.append((t, setting))
            results.sort()
            row = "  ".join(f"{'/'.join(map(str, s))}:{t:.2f}" for t, s in results)
            print(f"{label:26s} {nbytes / results[0][0] / 1e6:6.3f} TB/s best | {row}", flush=True)
            del sets
        for n, v in zip(names, saved):
            setattr(module, n, v)
        clear_all()


if __name__ == "__main__":
    main()
