"""bench/model.py with the GGUF gate/up + activation in one launch (``glu``, the tree as it is) or as the stacked
gate/up mat-vec and a ``silu_mul`` launch (``noglu``, main before session 24):

    python3 glu_variant.py glu|noglu [model.py args...]"""
import runpy
import sys

from mlx_native.models import base

variant = sys.argv.pop(1)
if variant == "noglu":
    base.GatedMLP._ggml_gate_up = lambda self: None
print(f"[variant] {variant}", flush=True)
sys.argv[0] = "bench/model.py"
runpy.run_path("bench/model.py", run_name="__main__")
