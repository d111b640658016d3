"""Decisions of every step_with_tail caller on a grid of (K, N) (H100: 132 SMs), one line each, for before / after diffs
(session 27: `python tail_decisions.py > before.txt` on main, then on the tree, and `diff`; no GPU)."""
import itertools
from mlx_native.ops.ggml import q8_mv, q4k_mv, q6k_mv
from mlx_native.ops.quant import affine_mv_odd
SMS = 132
Ks = [256 * i for i in range(1, 80)] + [576, 1536, 2880, 5376, 8960, 11008, 18944, 13824, 27648, 3584, 9728]
Ns = [576, 1024, 1536, 2048, 2560, 3584, 4096, 5120, 8192, 9728, 14336, 18944, 49152, 151936]
for k, n in itertools.product(sorted(set(Ks)), Ns):
    print("q8", k, n, q8_mv.tiling(k, n, SMS))
    print("q4k", k, n, q4k_mv.tiling(k, q4k_mv.Q4K_MAX_WPS, -(-n // q4k_mv.Q4K_BN), q4k_mv.PROGRAMS_PER_SM * SMS))
    print("q5k", k, n, q4k_mv.tiling(k, q4k_mv.Q5K_MAX_WPS, -(-n // q4k_mv.Q5K_BN), q4k_mv.Q5K_PROGRAMS_PER_SM * SMS))
    print("q6k", k, n, q6k_mv.tiling(k, n, SMS))
    if hasattr(affine_mv_odd, "tiling"):
        print("odd", k, n, affine_mv_odd.tiling(k, n, SMS))
