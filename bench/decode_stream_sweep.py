"""Stream-K decode (``ops/attention/stream.py``) against the split decode, on batch decode rows (developer tool).

Each row times, in CUDA-graph replay with input sets rotated out of L2 (two round-robin rounds, the better median
kept): SDPA's cuDNN and flash backends (uniform lengths only; ragged rows: flash on the batch padded to the longest,
which attends to the padding and is a lower bound for any padded SDPA), the split decode (``split``), the default
route (``default``), and the stream-K kernel with other tile configs ``(BLOCK_N, num_warps, num_stages)``, work units
and program counts (``P`` = SMs x k, or ``--counts``). It prints, per row, the best of each and the rule it checks:
the stream kernel should be at least as fast as the split decode wherever ``stream.use_stream`` sends a batch to it.
Session 16 also timed the whole tiles through tensor descriptors (TMA): 0.5-1% slower, removed.

    python bench/decode_stream_sweep.py [--out FILE.json] [--quick] [--routes] [--programs] [--counts 128,132]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from decode_merge_sweep import make_sets, ours, peer  # noqa: E402

from mlx_native.ops.attention import decode, stream  # noqa: E402
from mlx_native.runtime import plans  # noqa: E402
from mlx_native.runtime.device import device_info  # noqa: E402

# (batch, Hq, Hkv, kv, D, ragged)
SHAPES = [(8, 64, 8, 32768, 128, False), (8, 64, 8, 32768, 128, True), (8, 64, 8, 8192, 128, False),
          (8, 64, 8, 131072, 128, False), (32, 64, 8, 8192, 128, False), (32, 64, 8, 32768, 128, True),
          (2, 64, 8, 32768, 128, False), (4, 32, 8, 8192, 128, True), (8, 16, 8, 32768, 256, False),
          (8, 16, 8, 8192, 256, True), (8, 64, 8, 1024, 128, False), (32, 64, 8, 1024, 128, False),
          (8, 9, 3, 2048, 64, False), (16, 64, 8, 4096, 128, False), (4, 64, 8, 16384, 128, True),
          (4, 64, 8, 8192, 128, False)]
QUICK = SHAPES[:2]
# besides stream_config's
CONFIGS = [(128, 4, 2), (128, 8, 2), (128, 4, 3), (128, 4, 4), (128, 8, 3), (64, 4, 2), (64, 4, 3)]
UNITS = [16, 64]  # besides stream.UNIT (the tile), with the default config


def triton_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


DEFAULT_UNIT = stream.UNIT


def set_variant(route=None, config=None, programs=None, unit=None) -> None:
    """``route``: None (use_stream's rule), True (stream) or False (split decode); the others force the stream
    kernel's config, program count and work unit."""
    stream.STREAM_OVERRIDE, stream.CONFIG_OVERRIDE, stream.PROGRAMS_OVERRIDE = route, config, programs
    stream.UNIT = unit or DEFAULT_UNIT
    plans.clear_all()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "decode_stream_sweep.json"))
    ap.add_argument("--quick", action="store_true", help="the two issue-3 target rows only")
    ap.add_argument("--programs", action="store_true", help="also one program per SM where more fit")
    ap.add_argument("--routes", action="store_true", help="the default route, the split decode and stream-K only")
    ap.add_argument("--counts", default="", help="comma-separated program counts P for the default config")
    a = ap.parse_args()
    sms = device_info(torch.device("cuda")).sm_count
    rows = []

    def emit(**row):
        rows.append(row)
        print(json.dumps(row), flush=True)

    for b, hq, hkv, kv, d, ragged in (QUICK if a.quick else SHAPES):
        shape = f"B{b} Hq{hq} Hkv{hkv} kv{kv} D{d}" + (" ragged" if ragged else "")
        sets = make_sets(b, hq, hkv, kv, d, ragged)
        nbytes = sum(2 * int(n.clamp(max=kv).sum()) * hkv * d * 2 for *_, n in sets) / len(sets)
        variants = [("default", None, None, None, None), ("split", False, None, None, None),
                    ("stream", True, None, None, None)]
        variants += [(f"stream unit={u}", True, None, None, u) for u in UNITS if not a.routes]
        variants += [(f"stream P={c}", True, None, int(c), None) for c in filter(None, a.counts.split(","))]
        block_m = min(decode.MAX_BLOCK_M, max(16, triton_pow2(hq // hkv)))
        for config in [] if a.routes else CONFIGS:
            if d == 256 and config[0] > 64:
                continue
            occ = decode.occupancy(block_m, config[0], max(16, triton_pow2(d)), config[2], 2)
            for k in sorted({occ, 1} if a.programs else {occ}):
                variants.append((f"stream cfg={config} P={k}xSM", True, config, k * sms, None))
        for _ in range(common.DECODE_ROUNDS):
            for name in ("sdpa cudnn", "sdpa flash"):
                if ragged and name == "sdpa cudnn":
                    continue
                fn = peer(name)
                if ragged:
                    lmax = max(int(s[3].max()) for s in sets)
                    fn = (lambda q, kc, vc, lens, f=fn, lmax=lmax: f(q, kc[:, :, :lmax], vc[:, :, :lmax], lens))
                t = common.time_graph(fn, sets)
                emit(shape=shape, impl=name + (" padded" if ragged else ""), us=t,
                     tbps=nbytes / t / 1e6 if t else None)
            for name, route, config, programs, unit in variants:
                set_variant(route, config, programs, unit)
                try:
                    t = common.time_graph(ours, sets)
                except Exception as e:  # noqa: BLE001 - a config that does not compile is reported, not fatal
                    emit(shape=shape, impl=name, error=repr(e)[:200])
                    continue
                emit(shape=shape, impl=name, us=t, tbps=nbytes / t / 1e6 if t else None)
        del sets
        torch.cuda.empty_cache()
    set_variant()
    best = common.save_sweep(a.out, rows, lambda r: (r["shape"], r["impl"]))
    for shape in dict.fromkeys(s for s, _ in best):
        got = {impl: t for (s, impl), t in best.items() if s == shape}
        peers = [t for impl, t in got.items() if impl.startswith("sdpa")]
        streams = {impl: t for impl, t in got.items() if impl.startswith("stream")}
        top = min(streams, key=streams.get) if streams else None
        print(f"{shape:34s} default {got.get('default', 0):8.2f}  split {got.get('split', 0):8.2f}  "
              f"best stream {streams.get(top, 0):8.2f} ({top})  best sdpa {min(peers) if peers else 0:8.2f}")


if __name__ == "__main__":
    main()
