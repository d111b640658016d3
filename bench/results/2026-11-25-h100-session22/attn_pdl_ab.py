"""A/B of the decode attention launches as programmatic dependents (branch attn-pdl) against main's package
(snap/mlx_native_main, before any dependent launch) and PyTorch SDPA's cuDNN and flash backends, one process;
graph replay of 4 rotating input sets, 4 interleaved rounds, best of each (issue 3's decode rows)."""
import sys
sys.path.insert(0, "bench")
sys.path.insert(0, "snap")
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
import common
import mlx_native as new
import mlx_native_main as old
try:  # run 12: a copy of src with stream.STREAM_TRIGGER = True
    import mlx_native_trig as trig
except ImportError:
    trig = None

DT = torch.bfloat16


def sdpa(backend):
    def run(q, k, v, lens):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    return run


for b, kv in [(8, 32768), (8, 8192), (32, 8192)] if trig else [(8, 32768), (1, 8192), (1, 32768), (1, 131072)]:
    hq, hkv, d = 64, 8, 128
    sets = [(torch.randn(b, hq, 1, d, device="cuda", dtype=DT), torch.randn(b, hkv, kv, d, device="cuda", dtype=DT),
             torch.randn(b, hkv, kv, d, device="cuda", dtype=DT),
             torch.full((b,), kv, device="cuda", dtype=torch.int32)) for _ in range(4)]
    fns = {"new": lambda q, k, v, l: new.flash_attn_decode(q, k, v, l),
           "main": lambda q, k, v, l: old.flash_attn_decode(q, k, v, l),
           **({"trigger": lambda q, k, v, l: trig.flash_attn_decode(q, k, v, l)} if trig else {}),
           "sdpa cudnn": sdpa(SDPBackend.CUDNN_ATTENTION), "sdpa flash": sdpa(SDPBackend.FLASH_ATTENTION)}
    outs = {k_: f(*sets[0]).float() for k_, f in fns.items()}
    err = max((o - outs["sdpa flash"]).abs().max().item() for o in outs.values())
    same = torch.equal(outs["new"], outs["main"])
    best = common.time_graph_rounds(fns, sets, 4)
    peer = min(best["sdpa cudnn"], best["sdpa flash"])
    mb = 2 * b * hkv * kv * d * 2 / 1e6
    print(f"decode B{b} Hq{hq} Hkv{hkv} kv{kv} D{d}: " + ", ".join(f"{k_} {v:.2f}" for k_, v in best.items())
          + f" us; best SDPA / new {peer / best['new']:.4f}, / main {peer / best['main']:.4f}; "
          f"new {mb / best['new']:.3f} TB/s; new == main bits {same}, max |diff| vs flash {err:.2e}",
          flush=True)
