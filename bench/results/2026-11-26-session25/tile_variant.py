"""bench/model.py with the one-row MLX integer-dot kernel's tiles of main before session 25 (``old``: 4-row tiles,
at most 2-warp steps), the whole-row steps (``whole``, the tree as it is: plain matrices only), or the tree with
GGUF Q4_0 / Q4_1 gate/up pairs on at most 2-warp steps (``q4glu2``):

    python3 tile_variant.py old|whole|q4glu2 [model.py args...]

Run 5 ran an earlier form of this script, when ``tile_shape`` also gave gate/up pairs whole-row steps: its
``whole`` variant was that (2760 tok/s), its ``whole-noglu`` variant patched ``tile_shape`` to keep gate/up pairs
on 2-warp steps, which is the tree's rule now (2863)."""
import runpy
import sys

from mlx_native.ops.ggml import q4_idot
from mlx_native.ops.quant import affine_idot

variant = sys.argv.pop(1)
if variant == "old":
    affine_idot.WHOLE_ROW_WORDS = ()
elif variant == "q4glu2":
    q4_idot.Q4I_GLU_MAX_WARPS = 2
print(f"[variant] {variant}", flush=True)
sys.argv[0] = "bench/model.py"
runpy.run_path("bench/model.py", run_name="__main__")
