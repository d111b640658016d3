"""Session 43 review: sha1 of the offline sm_90 SASS (Triton 3.6) of the token-mixing MoE kernels (MLX moe_idot_mix_kernel,
GGUF moe_q4k_mix_kernel) for a before / after comparison: python sass_mix.py OUT (run from the repo root, Triton 3.6
first on PYTHONPATH)."""
import sys, hashlib
sys.path.insert(0, "scripts")
from sass_probe import compile_sass
from mlx_native.ops.moe.idot import mix_chunks, moe_idot_mix_kernel
from mlx_native.ops.moe.gguf_idot import moe_q4k_mix_kernel
out = sys.argv[1]
cases = []
k, gs = 768, 64
ch = mix_chunks(k, 8)
for pdl in (False, True):
    cases.append((f"mlx_mix_pdl{int(pdl)}", moe_idot_mix_kernel, dict(STRIDE_E=2048 * k // 8, STRIDE_SE=2048 * k // gs,
        STRIDE_W=k // 8, STRIDE_S=k // gs, BN=8, CH=ch, SLOTS=8, TOPK=8, GS=gs, EVEN_N=True, ASM=True, PDL=pdl), 8 * ch // 32))
for q5k, bn in ((False, 4), (True, 8)):
    sbw = 44 if q5k else 36
    for pdl in (0, 2):
        for topk, slots in ((8, 8), (6, 8)):
            cases.append((f"q4k_mix_q5k{int(q5k)}_pdl{pdl}_top{topk}", moe_q4k_mix_kernel, dict(STRIDE_W=k // 256 * sbw,
                STRIDE_E=2048 * k // 256 * sbw, BN=bn, CH=16, CHUNKS=12, SLOTS=slots, TOPK=topk, EVEN_N=True, Q5K=q5k,
                ASM=True, PDL=pdl), slots * 16 // 32))
with open(out, "w") as f:
    for name, fn, const, warps in cases:
        sass, regs, _ = compile_sass(fn, const, warps)

        f.write(f"{name} regs {regs} sha {hashlib.sha1(sass.encode()).hexdigest()}\n")
print(open(out).read())
