"""Attention family benchmark: flash_attn_prefill and flash_attn_decode vs PyTorch SDPA backends.

Peers, measured in the same run: ``F.scaled_dot_product_attention`` pinned to
its FlashAttention-2 backend ("sdpa flash"), cuDNN backend ("sdpa cudnn") and
memory-efficient backend ("sdpa efficient"); for the ragged decode batch the
peers run on the batch padded to its longest sequence (with a key-padding
mask, which is what correctness requires).

    python bench/run_all.py --out DIR --families attention      # rows for results.json / results.md
    python bench/run_all.py --out DIR --families attention --ops decode   # decode rows only
    python bench/attention.py --sweep DIR [--kinds decode]       # launch-config sweep (developer tool)
    python bench/attention.py --run DIR [--budget S] [--reps N] [--ops decode]  # written row by row
    python bench/attention.py --report DIR/results.json          # attention table: TFLOP/s, TB/s, ratios

Prefill shapes follow FlashAttention's benchmark: 16k tokens per batch
(B = 16384 / L), hidden 2048 (H = 2048 / D), MHA, plus a Llama-3-8B GQA row.
FLOPs count the visible (query, key) pairs only: 4 * D per pair.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from common import Case, Impl  # noqa: E402
from read_ceiling import add_read_ceiling  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.attention.stream import large_batch  # noqa: E402

BF16 = torch.bfloat16
PREFILL_LENGTHS = [1024, 4096, 8192, 16384]
PREFILL_DIMS = [64, 128, 256]
DECODE_BATCHES = [1, 8, 32]
DECODE_LENGTHS = [1024, 8192, 32768, 131072]
DECODE_HEADS = {128: (64, 8), 256: (16, 8)}  # D -> (Hq, Hkv): Llama-70B-like 8:1, Gemma-2/3-like D=256
TOL = 3e-2
# Every decode row also times our other route side by side (not a peer): batch-1 rows the split decode with the
# merge fused into the last split (the default merges in a programmatic dependent launch, decode.merge_mode),
# batches the split decode (decode.DecodePlan) where the default is the stream-K kernel (stream.use_stream), or
# the stream-K kernel where the default is the split decode.
OTHER_ROUTE_B1 = "mlx-native[fused merge]"


def _sdpa(backend_name: str):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, backend_name)

    def run(q, k, v, causal=False, mask=None):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                                  enable_gqa=q.shape[1] != k.shape[1])

    return run


PEERS = {"sdpa flash": "FLASH_ATTENTION", "sdpa cudnn": "CUDNN_ATTENTION", "sdpa efficient": "EFFICIENT_ATTENTION"}


def pairs(lq: int, lk: int, causal: bool) -> int:
    """Visible (query, key) pairs of one head (bottom-right causal: row i sees keys <= Lk - Lq + i)."""
    if not causal:
        return lq * lk
    off = lk - lq
    if off >= 0:
        return lq * off + lq * (lq + 1) // 2
    return sum(off + i + 1 for i in range(-off, lq))


def prefill_case(b, hq, hkv, l, d, causal, dtype=BF16) -> Case:
    esize = torch.empty((), dtype=dtype).element_size()

    def make():
        return (torch.randn(b, hq, l, d, device=common.DEVICE, dtype=dtype),
                torch.randn(b, hkv, l, d, device=common.DEVICE, dtype=dtype),
                torch.randn(b, hkv, l, d, device=common.DEVICE, dtype=dtype))

    impls = {"mlx-native": Impl(lambda q, k, v: mn.flash_attn_prefill(q, k, v, causal=causal), tolerance=TOL)}
    for name, backend in PEERS.items():
        fn = _sdpa(backend)
        impls[name] = Impl(lambda q, k, v, fn=fn: fn(q, k, v, causal), tolerance=TOL)
    nbytes = (2 * b * hq * l * d + 2 * b * hkv * l * d) * esize
    flops = 4 * b * hq * pairs(l, l, causal) * d
    return Case("attention", "prefill causal" if causal else "prefill", f"B{b} Hq{hq} Hkv{hkv} L{l} D{d}",
                str(dtype), "large", nbytes, make, impls, flops=flops)


def decode_case(b, hq, hkv, kv, d, dtype=BF16, ragged=False) -> Case:
    esize = torch.empty((), dtype=dtype).element_size()
    gen = torch.Generator().manual_seed(b * 7 + kv)
    lens_host = (torch.randint(1024, kv + 1, (b,), generator=gen) if ragged else torch.full((b,), kv)).tolist()
    lmax = max(lens_host)

    def make():
        q = torch.randn(b, hq, 1, d, device=common.DEVICE, dtype=dtype)
        kc = torch.randn(b, hkv, kv, d, device=common.DEVICE, dtype=dtype)
        vc = torch.randn(b, hkv, kv, d, device=common.DEVICE, dtype=dtype)
        lens = torch.tensor(lens_host, dtype=torch.int32, device=common.DEVICE)
        return q, kc, vc, lens

    impls = {"mlx-native": Impl(lambda q, kc, vc, lens: mn.flash_attn_decode(q, kc, vc, lens), tolerance=TOL)}
    for name, backend in PEERS.items():
        fn = _sdpa(backend)
        if ragged:
            pad_mask = (torch.arange(lmax)[None, :] < torch.tensor(lens_host)[:, None])[:, None, None, :]
            pad_mask = pad_mask.to(common.DEVICE)

            def run(q, kc, vc, lens, fn=fn, pad_mask=pad_mask):
                return fn(q, kc[:, :, :lmax], vc[:, :, :lmax], False, pad_mask)
            impls[name + " (padded, masked)"] = Impl(run, tolerance=TOL)
        else:
            impls[name] = Impl(lambda q, kc, vc, lens, fn=fn: fn(q, kc, vc, False), tolerance=TOL)
    if ragged:
        # FlashAttention's kernel takes no mask: on the padded batch it attends to the padding too. Its time
        # is the cost of padding alone (a lower bound for any padded SDPA); its values are not comparable.
        flash = _sdpa("FLASH_ATTENTION")
        impls["sdpa flash (padded, unmasked: timing only)"] = Impl(
            lambda q, kc, vc, lens: flash(q, kc[:, :, :lmax], vc[:, :, :lmax], False), tolerance=float("inf"))
        impls["sdpa math (padded, masked)"] = Impl(
            lambda q, kc, vc, lens: _sdpa("MATH")(q, kc[:, :, :lmax], vc[:, :, :lmax], False, pad_mask),
            tolerance=TOL)
    nbytes = (2 * sum(lens_host) * hkv * d + 2 * b * hq * d) * esize
    flops = 4 * hq * sum(lens_host) * d
    shape = f"B{b} Hq{hq} Hkv{hkv} kv{kv} D{d}" + (" ragged 1k-" + str(kv // 1024) + "k" if ragged else "")
    case = Case("attention", "decode", shape, str(dtype), "decode", nbytes, make, impls, flops=flops)
    return add_read_ceiling(case, 2 * sum(lens_host) * hkv * d * esize)  # the K / V rows the batch attends to


def prefill_variant(cfg, causal):
    """Ours with another (BLOCK_M, BLOCK_N, warps, stages): a named extra row entry (not a peer)."""
    from mlx_native.ops.attention import prefill as pre

    plans = {}

    def run(q, k, v):
        key = (q.shape, q.stride(), k.shape, k.stride())
        plan = plans.get(key)
        if plan is None:
            d = max(16, triton_next_pow2(q.shape[-1]))
            saved = pre.GPU_CONFIGS[(True, d)]
            pre.GPU_CONFIGS[(True, d)] = cfg
            try:
                plan = plans[key] = pre.PrefillPlan(q, k, v, causal=causal, mask=None, window=0, softcap=0.0)
            finally:
                pre.GPU_CONFIGS[(True, d)] = saved
        return plan(q, k, v, None, q.shape[-1] ** -0.5, 0.0)[0]

    return Impl(run, tolerance=TOL)


def decode_variant(merge=None):
    """Ours through the split decode (``decode.DecodePlan``), with a forced merge (``merge``: "fused", "pdl" or
    "launch", see ``decode.merge_mode``) or the default one."""
    from mlx_native.ops.attention import decode as dec

    plans = {}

    def run(q, kc, vc, lens):
        key = (q.shape, kc.shape, kc.stride())
        plan = plans.get(key)
        if plan is None:
            saved = dec.MERGE_OVERRIDE
            dec.MERGE_OVERRIDE = merge
            try:
                plan = plans[key] = dec.DecodePlan(q, kc, vc, lens, window=0, softcap=0.0)
            finally:
                dec.MERGE_OVERRIDE = saved
        return plan(q, kc, vc, lens, q.shape[-1] ** -0.5, 0.0)

    return Impl(run, tolerance=TOL)


def stream_variant():
    """Ours through the stream-K kernel (``stream.StreamPlan``)."""
    from mlx_native.ops.attention import stream

    plans = {}

    def run(q, kc, vc, lens):
        key = (q.shape, kc.shape, kc.stride())
        plan = plans.get(key)
        if plan is None:
            plan = plans[key] = stream.StreamPlan(q, kc, vc, lens, window=0, softcap=0.0)
        return plan(q, kc, vc, lens, q.shape[-1] ** -0.5, 0.0)

    return Impl(run, tolerance=TOL)


def _other_routes(case: Case, b: int, stream_default: bool) -> None:
    """Our route that the default did not take (see OTHER_ROUTE_B1), named in the row."""
    if b == 1:
        case.impls[OTHER_ROUTE_B1] = decode_variant(merge="fused")
    elif stream_default:
        case.impls["mlx-native[split-KV]"] = decode_variant()
    else:
        case.impls["mlx-native[stream-K]"] = stream_variant()


def triton_next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def cases() -> list[Case]:
    """Target rows first (so a time-limited run measures them), then the rest of the grid."""
    first, rest = [], []
    for d in PREFILL_DIMS:
        for l in PREFILL_LENGTHS:
            for causal in (False, True):
                c = prefill_case(16384 // l, 2048 // d, 2048 // d, l, d, causal)
                if l == 8192 and d in (128, 256):
                    for alt in ([(128, 128, 8, 3), (128, 64, 8, 4)] if d == 128 else [(128, 64, 8, 3)]):
                        c.impls["mlx-native[cfg %s]" % (alt,)] = prefill_variant(alt, causal)
                (first if l == 8192 and d in (128, 256) else rest).append(c)
    rest.append(prefill_case(1, 32, 8, 8192, 128, True))  # Llama 3 8B GQA
    for d, (hq, hkv) in DECODE_HEADS.items():
        for b in DECODE_BATCHES:
            for kv in DECODE_LENGTHS:
                if b * hkv * kv * d * 4 > 20 << 30:  # > 20 GiB of K/V per input set
                    continue
                c = decode_case(b, hq, hkv, kv, d)
                _other_routes(c, b, large_batch(b, 2 * b * hkv * kv * d * 2))
                target = d == 128 and ((b == 8 and kv == 32768) or (b == 1 and kv >= 8192))
                (first if target else rest).append(c)
    ragged = decode_case(8, 64, 8, 32768, 128, ragged=True)
    _other_routes(ragged, 8, True)
    first.append(ragged)
    return first + rest


def run(out_dir: str, reps: int, budget_s: float, ops: str = "") -> None:
    """Time every case (target rows first), rewriting results.json / results.md after each row,
    so a time-limited device call still returns what it measured."""
    import report

    os.makedirs(out_dir, exist_ok=True)
    t_start = time.time()
    env = common.environment()
    copy_bw = common.copy_bandwidth()
    print(f"[bench] {env.get('gpu')}: copy bandwidth {copy_bw / 1e12:.3f} TB/s", flush=True)
    rows = []
    keep = set(filter(None, ops.split(",")))
    for case in cases():
        if keep and case.op not in keep:
            continue
        if time.time() - t_start > budget_s:
            print(f"[bench] budget exhausted, skipped {case.op} {case.shape}", flush=True)
            continue
        t0 = time.time()
        modes = ["eager", "graph"] if case.regime == "decode" else ["eager"]
        try:
            row = common.run_case(case, modes, reps=reps)
        except Exception as exc:  # noqa: BLE001 - keep the other rows
            row = {k: getattr(case, k) for k in ("family", "op", "shape", "dtype", "regime", "bytes", "flops")}
            row["error"] = repr(exc)[:500]
        rows.append(report.enrich([row], copy_bw)[0])
        r = rows[-1]
        ceiling = f" {100 * r['frac_ceiling']:5.1f}% ceiling" if "frac_ceiling" in r else ""
        print(f"[bench] {case.op:15s} {case.shape:36s} ours {r.get('ours_us', float('nan')):9.1f} us{ceiling}  "
              f"vs {r.get('best_peer', '-')}: {r.get('speedup_vs_best', float('nan')):.2f}x  ({time.time() - t0:.0f}s)",
              flush=True)
        payload = {"environment": env, "copy_bandwidth_Bps": copy_bw, "rows": rows, "host_overhead": []}
        common.save_json(os.path.join(out_dir, "results.json"), payload)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(report_text(os.path.join(out_dir, "results.json")) + "\n\n" + report.markdown(env, copy_bw, rows))
    try:
        plot(os.path.join(out_dir, "results.json"), os.path.join(out_dir, "attention.png"))
    except Exception as exc:  # noqa: BLE001 - the tables are the result; the plot is a convenience
        print(f"[bench] plot failed: {exc!r}")


def plot(results_json: str, path: str) -> None:
    """Prefill TFLOP/s and decode TB/s per implementation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in json.load(open(results_json))["rows"] if r.get("family") == "attention" and "error" not in r]
    fig, axes = plt.subplots(2, 1, figsize=(18, 11))
    for ax, kind in zip(axes, ("prefill", "decode")):
        sel = [r for r in rows if r["op"].startswith(kind)]
        mode = "graph_us" if kind == "decode" else "eager_us"
        names = sorted({n for r in sel for n in r.get(mode, {}) if not n.startswith("mlx-native[")},
                       key=lambda n: (n != "mlx-native", n))
        width = 0.8 / max(len(names), 1)
        for i, name in enumerate(names):
            vals = []
            for r in sel:
                t = r.get(mode, {}).get(name)
                vals.append(0 if t is None else (r["flops"] / t / 1e6 if kind == "prefill" else r["bytes"] / t / 1e6))
            ax.bar([j + i * width for j in range(len(sel))], vals, width, label=name)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(sel))])
        ax.set_xticklabels([f"{r['op']}\n{r['shape']}" for r in sel], rotation=35, ha="right", fontsize=6)
        ax.set_ylabel("TFLOP/s" if kind == "prefill" else "TB/s of K/V read (CUDA graph)")
        ax.set_title(f"attention {kind} (higher is better)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# --------------------------------------------------------------------------- sweep (developer tool)

def _time(fn, args, reps=10) -> float:
    """Median microseconds per call over passes of ``common.MIN_CALLS`` calls (a GPU sleep queued first)."""
    for _ in range(2):
        fn(*args)
    torch.cuda.synchronize()

    def run_pass():
        for _ in range(common.MIN_CALLS):
            fn(*args)

    return common._time_pass(run_pass, reps) / common.MIN_CALLS


def sweep(out_dir: str, budget_s: float = 1e9, kinds: str = "prefill,decode") -> None:
    """Time prefill/decode launch configs on the target shapes (ours and the peers), most important first,
    until ``budget_s`` seconds have passed; ``kinds`` keeps the prefill and/or decode jobs. Rows go to
    ``out_dir/attention_sweep.jsonl`` as they come."""
    from mlx_native.ops.attention import decode as dec
    from mlx_native.ops.attention import prefill as pre
    from mlx_native.runtime.plans import clear_all

    os.makedirs(out_dir, exist_ok=True)
    log = open(os.path.join(out_dir, "attention_sweep.jsonl"), "w")
    t_start = time.time()

    def emit(row):
        print("[sweep]", json.dumps(row), flush=True)
        log.write(json.dumps(row) + "\n")
        log.flush()

    def prefill_job(d, causal, configs):
        h, b = 2048 // d, 2
        q, k, v = (torch.randn(b, h, 8192, d, device="cuda", dtype=BF16) for _ in range(3))
        flops = 4 * b * h * pairs(8192, 8192, causal) * d
        for name, backend in PEERS.items():
            try:
                t = _time(lambda q, k, v: _sdpa(backend)(q, k, v, causal), (q, k, v))
                emit(dict(kind="prefill", d=d, causal=causal, impl=name, us=t, tflops=flops / t / 1e6))
            except Exception as exc:  # noqa: BLE001
                emit(dict(kind="prefill", d=d, causal=causal, impl=name, error=repr(exc)[:200]))
        saved = pre.GPU_CONFIGS[(True, d)]
        for cfg in configs:
            if time.time() - t_start > budget_s:
                break
            pre.GPU_CONFIGS[(True, d)] = cfg
            clear_all()
            try:
                t0 = time.time()
                t = _time(lambda q, k, v: mn.flash_attn_prefill(q, k, v, causal=causal), (q, k, v))
                emit(dict(kind="prefill", d=d, causal=causal, impl="ours", cfg=cfg, us=t, tflops=flops / t / 1e6,
                          wall_s=round(time.time() - t0, 1)))
            except Exception as exc:  # noqa: BLE001
                emit(dict(kind="prefill", d=d, causal=causal, impl="ours", cfg=cfg, error=repr(exc)[:300]))
        pre.GPU_CONFIGS[(True, d)] = saved
        clear_all()

    def decode_job(b, kv, d, configs, splits_list):
        hq, hkv = DECODE_HEADS[d]
        q = torch.randn(b, hq, 1, d, device="cuda", dtype=BF16)
        kc, vc = (torch.randn(b, hkv, kv, d, device="cuda", dtype=BF16) for _ in range(2))
        lens = torch.full((b,), kv, dtype=torch.int32, device="cuda")
        nbytes = 2 * b * hkv * kv * d * 2
        for name, backend in PEERS.items():
            try:
                t = _time(lambda q, k, v: _sdpa(backend)(q, k, v), (q, kc, vc))
                emit(dict(kind="decode", b=b, kv=kv, d=d, impl=name, us=t, tbps=nbytes / t / 1e6))
            except Exception as exc:  # noqa: BLE001
                emit(dict(kind="decode", b=b, kv=kv, d=d, impl=name, error=repr(exc)[:200]))
        saved = (dec.tile_config, dec.SPLITS_OVERRIDE)
        for cfg in configs:
            for splits in splits_list:
                if time.time() - t_start > budget_s:
                    break
                dec.tile_config = lambda block_d, span, dtype, batch, name="", cfg=cfg: cfg
                dec.SPLITS_OVERRIDE = splits
                clear_all()
                try:
                    t = _time(lambda q, kc, vc, n: mn.flash_attn_decode(q, kc, vc, n), (q, kc, vc, lens))
                    emit(dict(kind="decode", b=b, kv=kv, d=d, impl="ours", cfg=cfg, splits=splits, us=t,
                              tbps=nbytes / t / 1e6))
                except Exception as exc:  # noqa: BLE001
                    emit(dict(kind="decode", b=b, kv=kv, d=d, impl="ours", cfg=cfg, error=repr(exc)[:300]))
        dec.tile_config, dec.SPLITS_OVERRIDE = saved
        clear_all()

    p128 = [(128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 4, 3), (128, 128, 8, 2), (64, 64, 4, 3)]
    p256 = [(128, 64, 8, 2), (64, 64, 4, 2), (128, 32, 8, 2), (64, 32, 4, 3)]
    p64 = [(128, 64, 4, 3), (128, 128, 8, 3), (128, 64, 4, 4), (64, 64, 4, 3)]
    dgrid = [(64, 4, 4), (64, 4, 3), (64, 4, 5), (64, 8, 4), (128, 4, 3), (128, 8, 3), (32, 4, 4), (32, 4, 6)]
    jobs = [
        ("prefill", lambda: prefill_job(128, False, p128)), ("prefill", lambda: prefill_job(128, True, p128)),
        ("decode", lambda: decode_job(8, 32768, 128, dgrid, (None, 4))),
        ("decode", lambda: decode_job(1, 8192, 128, dgrid, (None,))),
        ("decode", lambda: decode_job(1, 32768, 128, dgrid[:4], (None,))),
        ("prefill", lambda: prefill_job(256, False, p256)), ("prefill", lambda: prefill_job(256, True, p256)),
        ("decode", lambda: decode_job(8, 32768, 256, [(32, 4, 4), (64, 4, 3), (32, 4, 3), (64, 8, 3)], (None,))),
        ("decode", lambda: decode_job(32, 8192, 128, dgrid[:3], (None, 1))),
        ("prefill", lambda: prefill_job(64, False, p64)), ("prefill", lambda: prefill_job(64, True, p64)),
    ]
    jobs = [job for kind, job in jobs if kind in kinds.split(",")]
    for job in jobs:
        if time.time() - t_start > budget_s:
            emit(dict(kind="note", msg="sweep budget exhausted"))
            break
        job()
        torch.cuda.empty_cache()
    log.close()


# --------------------------------------------------------------------------- report

def report_text(results_json: str) -> str:
    """Markdown table of the attention rows: TFLOP/s (prefill), TB/s (decode), ratios to each peer."""
    data = json.load(open(results_json))
    rows = [r for r in data["rows"] if r.get("family") == "attention"]
    env = data["environment"]
    copy_bw = data["copy_bandwidth_Bps"]
    lines = [f"# Attention benchmark ({env.get('gpu')}, torch {env.get('torch')}, triton {env.get('triton')}, "
             f"CUDA {env.get('cuda')}, {env.get('date')})", "",
             f"Copy bandwidth (read + write): {copy_bw / 1e12:.2f} TB/s. Prefill: eager timings (GPU-bound), "
             "TFLOP/s over visible (query, key) pairs. Decode: CUDA-graph replay, TB/s of K/V actually read "
             "(ragged: the real lengths). ratio = peer time / ours (> 1: we are faster).", ""]
    for kind in ("prefill", "decode"):
        sel = [r for r in rows if r["op"].startswith(kind)]
        if not sel:
            continue
        peers = sorted({p for r in sel for p in list(r.get("eager_us", {})) + list(r.get("graph_us", {}))
                        if p != "mlx-native"})
        unit = "TFLOP/s" if kind == "prefill" else "TB/s"
        lines += [f"## {kind}", "",
                  f"| op | shape | ours us | ours {unit} | " + " | ".join(f"{p} {unit} (ratio)" for p in peers) + " |",
                  "|---|---|---|---|" + "---|" * len(peers)]
        for r in sel:
            if "error" in r:
                lines.append(f"| {r['op']} | {r['shape']} | error: {r['error'][:100]} |")
                continue
            times = r["graph_us"] if kind == "decode" and r.get("graph_us") else r["eager_us"]

            def rate(t):
                return r["flops"] / t / 1e6 if kind == "prefill" else r["bytes"] / t / 1e6

            ours = times.get("mlx-native")
            cells = []
            for p in peers:
                t = times.get(p)
                cells.append("-" if t is None or ours is None else f"{rate(t):.0f} ({t / ours:.2f}x)"
                             if kind == "prefill" else f"{rate(t):.2f} ({t / ours:.2f}x)")
            lines.append(f"| {r['op']} | {r['shape']} | {ours:.1f} | "
                         f"{(rate(ours) if ours else float('nan')):.{0 if kind == 'prefill' else 2}f} | "
                         + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", metavar="DIR")
    parser.add_argument("--budget", type=float, default=1e9, help="sweep time budget in seconds")
    parser.add_argument("--kinds", default="prefill,decode", help="sweep: the jobs to keep (prefill, decode)")
    parser.add_argument("--report", metavar="RESULTS_JSON")
    parser.add_argument("--run", metavar="DIR", help="time all cases, writing DIR/results.json as rows come")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--ops", default="", help="comma-separated op names to keep with --run (e.g. decode)")
    args = parser.parse_args()
    if args.sweep:
        sweep(args.sweep, args.budget, args.kinds)
    if args.run:
        run(args.run, args.reps, args.budget, args.ops)
    if args.report:
        print(report_text(args.report))
