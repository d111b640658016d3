"""Turn benchmark rows into a markdown table and one PNG plot per family."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

OURS = "mlx-native"
CEILING = "ceiling: "  # names of bounds timed beside the implementations (see common.Impl), not peers


def _derive(row: dict[str, Any], copy_bw: float) -> dict[str, Any]:
    """Bandwidth, fraction of the copy ceiling and speed ratios of one row."""
    eager = row.get("eager_us", {})
    graph = row.get("graph_us", {})
    main = graph if row["regime"] == "decode" and OURS in graph else eager
    d: dict[str, Any] = {}
    if OURS in main:
        t = main[OURS]
        d["ours_us"] = t
        d["ours_tbps"] = row["bytes"] / (t * 1e-6) / 1e12
        d["frac_copy"] = row["bytes"] / (t * 1e-6) / copy_bw
        peers = {k: v for k, v in main.items() if not k.startswith((OURS, CEILING))}
        ceilings = [v for k, v in main.items() if k.startswith(CEILING)]
        if ceilings:
            d["frac_ceiling"] = min(ceilings) / t
        if peers:
            best = min(peers, key=peers.get)
            d["best_peer"] = best
            d["best_peer_us"] = peers[best]
            d["speedup_vs_best"] = peers[best] / t
    return d


def enrich(rows: list[dict[str, Any]], copy_bw: float) -> list[dict[str, Any]]:
    for row in rows:
        if "error" not in row:
            row.update(_derive(row, copy_bw))
    return rows


def _fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def markdown(env: dict[str, Any], copy_bw: float, rows: list[dict[str, Any]], notes: str = "") -> str:
    lines = [
        "# mlx-native benchmark results",
        "",
        f"GPU: {env.get('gpu')} ({env.get('sm_count')} SMs) | torch {env.get('torch')} | triton {env.get('triton')} | "
        f"CUDA {env.get('cuda')} | Liger-Kernel {env.get('liger_kernel')} | date {env.get('date')}",
        "",
        f"Measured device-to-device copy bandwidth (read + write): **{copy_bw / 1e12:.2f} TB/s**.",
        "",
        "Times are medians of CUDA-event timings over passes that rotate input sets (L2 does not hold the next "
        "call's data). `large` rows: calls issued back to back (GPU-bound). `decode` rows: the main number is "
        "GPU time per call from a CUDA-graph replay; `eager` is the same calls issued from Python, back to back "
        "with nothing queued ahead (host-bound at these sizes); every implementation of a decode row is timed in two round-robin rounds and keeps the "
        "better median. Speedup = best peer time / ours (>1: we are faster). `% of ceiling`: the time of the "
        "row's `ceiling:` entry (e.g. one streaming read of the same weight bytes, `bench/read_ceiling.py`) over "
        "ours.",
        "",
    ]
    if notes:
        lines += [notes, ""]
    by_family: dict[str, list] = defaultdict(list)
    for r in rows:
        by_family[r["family"]].append(r)
    for family, frows in by_family.items():
        lines += [f"## {family}", ""]
        lines += ["| op | shape | regime | MB moved | ours us | ours TB/s | % of copy | % of ceiling | best peer | "
                  "peer us | speedup | eager us (all) | graph us (all) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in frows:
            if "error" in r:
                lines.append(f"| {r['op']} | {r['shape']} | {r['regime']} | | error: {r['error'][:80]} |"
                             + " |" * 8)
                continue
            alls = lambda m: ", ".join(f"{k} {v:.1f}" for k, v in sorted(r.get(m, {}).items(), key=lambda kv: kv[1]))
            lines.append(
                f"| {r['op']} | {r['shape']} | {r['regime']} | {r['bytes'] / 1e6:.1f} | {_fmt(r.get('ours_us'))} | "
                f"{_fmt(r.get('ours_tbps'), 2)} | {_fmt(100 * r['frac_copy'] if 'frac_copy' in r else None)} | "
                f"{_fmt(100 * r['frac_ceiling'] if 'frac_ceiling' in r else None)} | {r.get('best_peer', '-')} | "
                f"{_fmt(r.get('best_peer_us'))} | {_fmt(r.get('speedup_vs_best'), 2)} | "
                f"{alls('eager_us')} | {alls('graph_us')} |"
            )
        lines.append("")
    return "\n".join(lines)


def plot_family(family: str, rows: list[dict[str, Any]], copy_bw: float, path: str) -> None:
    """Large sizes: achieved TB/s per implementation with the copy ceiling; decode: GPU us per call."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r["family"] == family and "error" not in r]
    large = [r for r in rows if r["regime"] == "large"]
    decode = [r for r in rows if r["regime"] == "decode"]
    fig, axes = plt.subplots(1, 2, figsize=(16, 6))
    for ax, subset, mode, ylabel in ((axes[0], large, "eager_us", "TB/s (higher is better)"),
                                     (axes[1], decode, "graph_us", "us per call, CUDA graph (lower is better)")):
        labels = [f"{r['op']}\n{r['shape']}" for r in subset]
        names = sorted({k for r in subset for k in r.get(mode, {})}, key=lambda n: (n != OURS, n))
        width = 0.8 / max(len(names), 1)
        for i, name in enumerate(names):
            vals = []
            for r in subset:
                t = r.get(mode, {}).get(name)
                vals.append(0 if t is None else (r["bytes"] / (t * 1e-6) / 1e12 if mode == "eager_us" else t))
            ax.bar([j + i * width for j in range(len(subset))], vals, width, label=name)
        if mode == "eager_us":
            ax.axhline(copy_bw / 1e12, color="k", linestyle="--", label=f"copy {copy_bw / 1e12:.2f} TB/s")
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(subset))])
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel(ylabel)
        ax.set_title(f"{family}: {'large (>= 64 MB)' if mode == 'eager_us' else 'decode sizes'}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
