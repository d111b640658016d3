"""bench/model.py with the decode step's tail (argmax, embedding lookup, position counters) as programmatic
dependent launches (``pdl``, the tree as it is) or plain launches (``plain``: main before session 24; the counters
by ``Tensor.add_``):

    python3 tail_variant.py pdl|plain [model.py args...]"""
import runpy
import sys

from mlx_native.kernels import increment
from mlx_native.kernels.launch import Launch
from mlx_native.ops.ggml import kernel as ggml_kernel
from mlx_native.ops.quant import kernel as quant_kernel
from mlx_native.ops.sampling import kernel as sampling_kernel

variant = sys.argv.pop(1)
if variant == "plain":
    def plain(kernel, grid, constexprs, device, trigger, **options):
        return Launch(kernel, grid, dict(constexprs, PDL=0), **options)

    for module in (ggml_kernel, quant_kernel, sampling_kernel):
        module.dependent_launch = plain
    increment.increment_ = lambda t: t.add_(1)
    from mlx_native.models import base
    base.increment_ = increment.increment_
print(f"[variant] {variant}", flush=True)
sys.argv[0] = "bench/model.py"
runpy.run_path("bench/model.py", run_name="__main__")
