"""Run the benchmark families and write JSON, markdown and PNG plots.

    python bench/run_all.py --out DIR [--families norms,rope,activations]

Run on a CUDA machine (see scripts/gpu_run.sh); results land in DIR as
results.json, results.md and <family>.png.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import overhead  # noqa: E402
import report  # noqa: E402

FAMILIES = ["norms", "rope", "activations", "attention", "quant"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--ops", default="", help="comma-separated op names to keep (default: all)")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    env = common.environment()
    copy_bw = common.copy_bandwidth()
    print(f"[bench] {env.get('gpu')}: copy bandwidth {copy_bw / 1e12:.3f} TB/s", flush=True)
    rows = []
    keep = set(filter(None, args.ops.split(",")))
    for family in args.families.split(","):
        module = importlib.import_module(family)
        for case in module.cases():
            if keep and case.op not in keep:
                continue
            t0 = time.time()
            modes = ["eager", "graph"] if case.regime == "decode" else ["eager"]
            try:
                row = common.run_case(case, modes, reps=args.reps)
            except Exception as exc:  # noqa: BLE001 - keep the other rows
                traceback.print_exc()
                row = {k: getattr(case, k) for k in ("family", "op", "shape", "dtype", "regime", "bytes")}
                row["error"] = repr(exc)
            rows.append(report.enrich([row], copy_bw)[0])
            r = rows[-1]
            ceiling = f" {100 * r['frac_ceiling']:5.1f}% ceiling" if "frac_ceiling" in r else ""
            print(f"[bench] {case.op:16s} {case.shape:28s} {case.regime:6s} ours {r.get('ours_us', float('nan')):9.2f} us "
                  f"{100 * r.get('frac_copy', float('nan')):5.1f}% copy{ceiling}  vs {r.get('best_peer', '-')}: "
                  f"{r.get('speedup_vs_best', float('nan')):.2f}x  ({time.time() - t0:.0f}s)", flush=True)
    try:
        over = overhead.rows()
    except Exception:  # noqa: BLE001 - a broken host-overhead probe must not lose the timed rows
        traceback.print_exc()
        over = []
    for o in over:
        print(f"[overhead] {o['call']:40s} {o['host_us']:.2f} us", flush=True)
    common.save_json(os.path.join(args.out, "results.json"),
                     {"environment": env, "copy_bandwidth_Bps": copy_bw, "rows": rows, "host_overhead": over})
    md = report.markdown(env, copy_bw, rows) + "\n" + overhead.markdown(over)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(md)
    for family in sorted({r["family"] for r in rows}):
        report.plot_family(family, rows, copy_bw, os.path.join(args.out, f"{family}.png"))
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
