"""bench/model.py with one norm-handoff variant per process:

    python3 handoff_variant.py VARIANT [model.py args...]

VARIANT: ``all`` (the tree as it is: o / down hand their norm to q/k/v and gate/up), ``qkv_only`` (the MLP's
gate/up takes no handoff: o keeps its norm launch, down hands its norm to the next layer's q/k/v)."""
import runpy
import sys

from mlx_native.models import base

variant = sys.argv.pop(1)
if variant == "qkv_only":
    base.GatedMLP.takes_handoff = lambda self, dtype: False
print(f"[variant] {variant}", flush=True)
sys.argv[0] = "bench/model.py"
runpy.run_path("bench/model.py", run_name="__main__")
