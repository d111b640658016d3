"""Session 45 run 6: the router logits in fp32 from bf16 x / W (torch.mm out_dtype) against converting both to fp32, and bf16 cuBLAS; graph replay, us a call."""
import torch, statistics
import common
x = torch.randn(32, 2048, device="cuda", dtype=torch.bfloat16)
w = torch.randn(128, 2048, device="cuda", dtype=torch.bfloat16) * 0.02
z = torch.mm(x, w.T, out_dtype=torch.float32)
ref = x.double() @ w.double().T
print("dtype", z.dtype, "err", (z.double() - ref).abs().max().item(), "fp32 path err", ((x.float() @ w.float().T).double() - ref).abs().max().item())
for t in (16, 32, 512):
    sets = [(torch.randn(t, 2048, device="cuda", dtype=torch.bfloat16),) for _ in range(4)]
    a = common.time_graph(lambda x: torch.mm(x, w.T, out_dtype=torch.float32), sets)
    b = common.time_graph(lambda x: torch.nn.functional.linear(x.float(), w.float()), sets)
    c = common.time_graph(lambda x: torch.nn.functional.linear(x, w), sets)
    print(f"T{t}: mm out_dtype fp32 {a:.2f} us, fp32 linear {b:.2f}, bf16 linear {c:.2f}")
