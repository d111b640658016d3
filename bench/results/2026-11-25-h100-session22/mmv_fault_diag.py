"""Which tree's forced-mmv Q4_0/Q4_1 launch faults: python3 diag.py TREE FMT M K N [graph]"""
import dataclasses, sys
sys.path.insert(0, "bench"); sys.path.insert(0, "snap")
import importlib, torch, common
from quant import gguf_raw
tree, fmt, m, k, n = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
pkg = importlib.import_module({"packed": "mlx_native"}.get(tree, "mlx_native_" + tree))
pkg.runtime.env.settings = dataclasses.replace(pkg.runtime.env.settings, mmv="on", gguf_mv=False)
pkg.runtime.plans.clear_all()
sets = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), gguf_raw(fmt, n, k)) for _ in range(4)]
f = lambda x, raw: pkg.ggml_matmul(x, raw, fmt, (n, k))
for i in range(3):
    for s in sets:
        f(*s); torch.cuda.synchronize()
print("eager ok", flush=True)
if len(sys.argv) > 6:
    print("graph", common.time_graph(f, sets), flush=True)
