import sys
sys.path.insert(0, "scripts"); sys.path.insert(0, "tests"); sys.path.insert(0, "tests/ops")
import numpy as np, torch
import cbank_lines as cb
cb._h100()
import sass_probe as sp
import mlx_native as mn
from mlx_native.kernels import launch as launch_mod
from mlx_native.runtime import plans
from test_ggml import valid_blocks, raw_tensor
rng = np.random.default_rng(0)
for name, k in [("Q4_0", 11008), ("Q4_1", 11008), ("Q4_0", 5376)]:
    raw = raw_tensor(valid_blocks(name, 4096, k, rng), "cpu")
    plans.clear_all()
    with launch_mod.recording(run=False) as rec:
        mn.ggml_matmul(torch.randn(1, k, dtype=torch.bfloat16), raw, name, (4096, k))
    for ln, args in rec:
        ln.constexprs = dict(ln.constexprs, ASM=True)
        sass, _ = cb.compile_launch(ln, args)
        h = sp.histogram(sp.main_loop(sass))
        print(name, k, ln.kernel.fn.__name__, {c: ln.constexprs[c] for c in ("G", "WPL", "TAIL") if c in ln.constexprs},
              "SASS", len([l for l in sass.splitlines() if "/*" in l and ";" in l]), "loop", sum(h.values()),
              "LDL/STL", h.get("LDL", 0) + h.get("STL", 0))
