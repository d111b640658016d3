"""Why the ragged decode row's default time differs from identical-config variants (GPU, developer tool).

In the session-5 and session-6 attention runs, ``mn.flash_attn_decode`` on the B8 kv32k ragged batch measured
230.9 us in graph replay (203.2 us eager) while ``decode_variant()`` rows of the same kernels took 200-204 us.
This times, on the same input sets and in several orders: the default entry point (whose plan the uniform case
built first, as in bench/attention.py), a variant with the default config and a fresh plan, the default after
``plans.clear_all()``, and the two-kernel merge; graph and eager, each twice.

    python scripts/ragged_probe.py
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))

import torch  # noqa: E402

import attention  # noqa: E402
import common  # noqa: E402
from mlx_native.runtime.plans import clear_all  # noqa: E402


def main() -> None:
    uniform = attention.decode_case(8, 64, 8, 32768, 128)
    ragged = attention.decode_case(8, 64, 8, 32768, 128, ragged=True)
    default = ragged.impls["mlx-native"].fn
    u_sets = common._input_sets(uniform)
    common.time_graph(uniform.impls["mlx-native"].fn, u_sets)  # the bench's order: the uniform row builds the plan
    del u_sets
    sets = common._input_sets(ragged)
    fresh = attention.decode_variant().fn
    two = attention.decode_variant(fused=False).fn
    order = [("default (plan from uniform)", default), ("variant (fresh plan)", fresh), ("2-kernel", two),
             ("default again", default)]
    for rnd in range(2):
        for mode, timer in (("graph", common.time_graph), ("eager", common.time_eager)):
            for name, fn in order:
                print(f"round {rnd} {mode:5s} {name:30s} {timer(fn, sets):8.1f} us", flush=True)
    clear_all()
    for mode, timer in (("graph", common.time_graph), ("eager", common.time_eager)):
        print(f"after clear_all {mode:5s} default {timer(default, sets):8.1f} us", flush=True)
    # the same call count per graph as one call per graph: is it the graph size (buffers per captured call)?
    for n in (1, 2, len(sets) * 0 + common.MIN_CALLS):
        sub = [sets[i % len(sets)] for i in range(n)]
        g = torch.cuda.CUDAGraph()
        for s in sub:
            default(*s)
        torch.cuda.synchronize()
        with torch.cuda.graph(g):
            for s in sub:
                default(*s)
        g.replay()
        torch.cuda.synchronize()
        t = common._time_pass(g.replay, 20) / n
        print(f"graph of {n:2d} calls: default {t:8.1f} us", flush=True)
    print("n_sets", len(sets), "MIN_CALLS", common.MIN_CALLS)


if __name__ == "__main__":
    main()
