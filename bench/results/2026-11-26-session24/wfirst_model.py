"""bench/model.py with the one-row mat-vecs' first weights loaded before the wait (argv[1] 1) or after it (0)."""
import runpy
import sys

from mlx_native.kernels import dependent

dependent.WEIGHTS_BEFORE_WAIT = sys.argv.pop(1) == "1"
print(f"[variant] WEIGHTS_BEFORE_WAIT={dependent.WEIGHTS_BEFORE_WAIT}", flush=True)
sys.argv[0] = "bench/model.py"
runpy.run_path("bench/model.py", run_name="__main__")
