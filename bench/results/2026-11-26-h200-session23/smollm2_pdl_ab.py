"""SmolLM2-shaped decode (bench/model.py's synthetic Q4_1 GGUF) with one PDL variant per process:

    python3 smollm2_pdl_ab.py VARIANT [model.py args...]

VARIANT: ``off`` (MLX_NATIVE_PDL=0, set by the caller), ``gemv_plain`` (the word-level mat-vec launched plainly,
main before session 23), ``gemv_wait`` / ``gemv_early`` / ``gemv_late`` (it waits; with the trigger at its start /
after its loop), ``gemv_late_merge_launch`` (and decode attention merged by a plain second launch)."""
import runpy
import sys

from mlx_native.kernels.launch import Launch
from mlx_native.ops.attention import decode
from mlx_native.ops.quant import gemv

variant = sys.argv.pop(1)
if variant == "gemv_plain":
    gemv.dependent_launch = lambda kernel, grid, constexprs, device, trigger, **options: Launch(
        kernel, grid, dict(constexprs, PDL=0), **options)
elif variant.startswith("gemv_"):
    gemv.GEMV_TRIGGER = {"wait": False, "early": True, "late": "late"}[variant.split("_")[1]]
if variant.endswith("merge_launch"):
    decode.MERGE_OVERRIDE = "launch"
print(f"[variant] {variant}", flush=True)
sys.argv[0] = "bench/model.py"
runpy.run_path("bench/model.py", run_name="__main__")
