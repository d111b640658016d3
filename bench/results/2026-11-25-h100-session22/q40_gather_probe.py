"""Offline probe (session 22): how triton 3.6 lowers tl.gather of Q4_0 code words from a 16-byte-vector load of
an 8-block chunk (sm_90 SASS op counts). Run with PYTHONPATH=<a triton 3.6 site-packages>."""
import triton, triton.language as tl, torch
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import subprocess, tempfile, os, re, collections

@triton.jit
def k(w_ptr, out_ptr, stride, BN: tl.constexpr):
    rows = tl.program_id(0) * BN + tl.arange(0, BN)
    t = tl.arange(0, 64)
    base = tl.multiple_of(rows * stride, 4)
    v = tl.load(w_ptr + base[:, None] + t[None, :], mask=(t < 36)[None, :], other=0)
    b = tl.arange(0, 8)[:, None]
    j = tl.arange(0, 4)[None, :]
    lo_i = tl.reshape(9 * (b // 2) + 5 * (b % 2) + j, (32,))
    hi_i = tl.reshape(9 * (b // 2) + j + 1, (32,))
    lo = tl.gather(v, tl.broadcast_to(lo_i[None, :], (BN, 32)), 1)
    hi = tl.gather(v, tl.broadcast_to(hi_i[None, :], (BN, 32)), 1)
    even = tl.broadcast_to((tl.reshape(b % 2 + 0 * j, (32,)) == 0)[None, :], (BN, 32))
    w = tl.where(even, ((lo >> 16) & 0xFFFF) | (hi << 16), lo)
    tl.store(out_ptr + rows[:, None] * 32 + tl.arange(0, 32)[None, :], w)

target = GPUTarget("cuda", 90, 64)
src = ASTSource(k, {"w_ptr": "*i32", "out_ptr": "*i32", "stride": "i32", "BN": "constexpr"}, {"BN": 64},
                {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]], (2,): [["tt.divisibility", 16]]})
c = triton.compile(src, target=target, options={"num_warps": 4})
open("/tmp/probe/gather.ttgir", "w").write(c.asm["ttgir"])
with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
    f.write(c.asm["cubin"])
bin_dir = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin")
sass = subprocess.run([os.path.join(bin_dir, "nvdisasm"), "-c", f.name], capture_output=True, text=True).stdout
OPS = r"\b(SHFL\.[A-Z]+|LDS[.A-Z0-9]*|STS[.A-Z0-9]*|LDG[.A-Z0-9]*|SEL|BAR[.A-Z]*)\b"
ops = collections.Counter(re.findall(OPS, sass))
print(len(sass.splitlines()), "lines", ops.most_common(12))
