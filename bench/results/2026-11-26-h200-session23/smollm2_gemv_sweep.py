"""SmolLM2-shaped decode (bench/model.py's synthetic Q4_1 GGUF) with the word-level mat-vec's knobs set, one
variant per process:

    python3 smollm2_gemv_sweep.py 'GEMV_WARPS=2;TILES_PER_SM=4' [model.py args...]

Each ``NAME=VALUE`` sets ``mlx_native.ops.quant.gemv.NAME`` (VALUE a Python literal) before the model loads;
``base`` keeps the defaults."""
import ast
import runpy
import sys

from mlx_native.ops.quant import gemv

variant = sys.argv.pop(1)
for item in variant.split(";"):
    if item != "base":
        name, value = item.split("=")
        assert hasattr(gemv, name), name
        setattr(gemv, name, ast.literal_eval(value))
print(f"[variant] {variant}", flush=True)
sys.argv[0] = "bench/model.py"
runpy.run_path("bench/model.py", run_name="__main__")
