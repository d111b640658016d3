"""Session 42: does a KV cache that stores each position's K and V rows side by side (``[B, Hkv, L, 2, D]``, K and V
as strided views) read faster in split-KV decode than two separate ``[B, Hkv, L, D]`` tensors? Each program then
streams one region instead of two. Ours and SDPA's cuDNN / flash backends on both layouts, interleaved rounds of
CUDA-graph replay (2 input sets), with one linear read of the same bytes as the ceiling."""
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import common  # noqa: E402
import mlx_native as mn  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

DEV = "cuda"


def make(b, hq, hkv, kv, d, layout):
    q = torch.randn(b, hq, 1, d, device=DEV, dtype=torch.bfloat16)
    if layout == "separate":
        kc = torch.randn(b, hkv, kv, d, device=DEV, dtype=torch.bfloat16)
        vc = torch.randn(b, hkv, kv, d, device=DEV, dtype=torch.bfloat16)
    else:
        buf = torch.randn(b, hkv, kv, 2, d, device=DEV, dtype=torch.bfloat16)
        kc, vc = buf[:, :, :, 0], buf[:, :, :, 1]
    lens = torch.full((b,), kv, dtype=torch.int32, device=DEV)
    return q, kc, vc, lens


def sdpa(backend):
    def run(q, kc, vc, lens):
        with sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(q, kc, vc, enable_gqa=True)
    return run


def ours(q, kc, vc, lens):
    return mn.flash_attn_decode(q, kc, vc, lens)


def main():
    print(torch.cuda.get_device_name(), flush=True)
    rounds = int(os.environ.get("ROUNDS", "6"))
    for b, kv in ((8, 32768), (1, 32768), (1, 131072)):
        hq, hkv, d = 64, 8, 128
        data = {lay: [make(b, hq, hkv, kv, d, lay) for _ in range(2)] for lay in ("separate", "pos-interleaved")}
        # same values in both layouts: outputs must agree
        q, kc, vc, lens = data["separate"][0]
        q2, kc2, vc2, _ = data["pos-interleaved"][0]
        kc2.copy_(kc), vc2.copy_(vc), q2.copy_(q)
        ref = ours(q, kc, vc, lens).float()
        for lay in data:
            for name, fn in (("ours", ours), ("cudnn", sdpa(SDPBackend.CUDNN_ATTENTION)),
                             ("flash", sdpa(SDPBackend.FLASH_ATTENTION))):
                try:
                    err = (fn(*data[lay][0]).float() - ref).abs().max().item()
                except Exception as exc:  # noqa: BLE001
                    err = f"fails: {type(exc).__name__}: {str(exc)[:120]}"
                print(f"  B{b} kv{kv} {lay:16s} {name:6s} max |diff| vs ours/separate {err}", flush=True)
        nbytes = 2 * b * hkv * kv * d * 2
        flat = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=DEV)
        fns = {}
        for lay in data:
            for name, fn in (("ours", ours), ("cudnn", sdpa(SDPBackend.CUDNN_ATTENTION)),
                             ("flash", sdpa(SDPBackend.FLASH_ATTENTION))):
                fns[(lay, name)] = fn
        times = {key: [] for key in fns}
        reads = []
        for _ in range(rounds):
            for key, fn in fns.items():
                t = common.time_graph(fn, data[key[0]])
                times[key].append(float("nan") if t is None else t)
            reads.append(common.time_graph(lambda x: x.sum(dtype=torch.float32), [(flat,)]))
        print(f"B{b} Hq{hq} Hkv{hkv} kv{kv} D{d}: {nbytes / 1e9:.3f} GB; linear read (sum) best "
              f"{min(reads):.2f} us", flush=True)
        for key, ts in times.items():
            print(f"  {key[0]:16s} {key[1]:6s} " + " ".join(f"{t:7.2f}" for t in ts)
                  + f"  best {min(ts):7.2f} median {statistics.median(ts):7.2f} us "
                  f"({nbytes / min(ts) / 1e6:.2f} TB/s)", flush=True)
        for lay in data:
            for peer in ("cudnn", "flash"):
                r = [p / o for p, o in zip(times[("separate", peer)], times[(lay, "ours")])]
                print(f"  {peer}/separate over ours/{lay}: median {statistics.median(r):.4f} "
                      f"range {min(r):.4f}-{max(r):.4f}", flush=True)
        del data, flat
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
