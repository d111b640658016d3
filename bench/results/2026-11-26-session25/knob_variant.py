"""bench/model.py with module constants of the package set first:

    python3 knob_variant.py [mlx_native.module.CONSTANT=int ...] -- [model.py args...]

(no assignment: the tree as it is)."""
import importlib
import runpy
import sys

split = sys.argv.index("--")
knobs, sys.argv = sys.argv[1:split], [sys.argv[0]] + sys.argv[split + 1:]
for knob in knobs:
    target, value = knob.split("=")
    module, name = target.rsplit(".", 1)
    setattr(importlib.import_module(module), name, int(value))
print(f"[variant] {' '.join(knobs) or 'tree'}", flush=True)
sys.argv[0] = "bench/model.py"
runpy.run_path("bench/model.py", run_name="__main__")
