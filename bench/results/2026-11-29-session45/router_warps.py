"""Session 45: moe_router (Qwen3-30B-A3B router, 128 x 2048 bf16, top-8) at 1-16 rows of x under each warps rule, in
CUDA-graph replay (us a call, min over rounds), against cuBLAS logits + moe_route."""
import torch

import common
import mlx_native as mn
import mlx_native.ops.moe.api as moe_api
from mlx_native.ops.moe import routing
from mlx_native.runtime import plans

r = torch.randn(128, 2048, device="cuda", dtype=torch.bfloat16) * 0.02
for t in (1, 2, 4, 8, 16):
    sets = [(torch.randn(t, 2048, device="cuda", dtype=torch.bfloat16),) for _ in range(4)]
    row = {"cuBLAS + route": common.time_graph(lambda x: mn.moe_route(torch.nn.functional.linear(x, r), 8), sets)}
    for warps in (1, 2, 4):
        routing.RouterPlan.warps = staticmethod(lambda rows, w=warps: w)
        for cache in [v for v in vars(moe_api).values() if isinstance(v, plans.PlanCache)]:
            cache.clear()
        best = min(common.time_graph(lambda x: mn.moe_router(x, r, 8), sets) for _ in range(3))
        row[f"{warps} warps"] = best
    print(f"T{t:3d} " + "  ".join(f"{k} {v:6.2f}" for k, v in row.items()), flush=True)
