"""Minimal one-row rms_norm kernels that differ in one thing each (session 20 runs 6, 8-10, 14; used by
lean_norm.py, norm_ncu.py, launch_path_ab.py, param_lines.py, early_w.py).

static_k: row length and eps constexpr (inductor's form: its kernel bakes r0_numel = 576 in), 3 pointer params;
runtime_k: row length and eps runtime (5 params); many_k: runtime_k + 16 unused int params;
spread_k: runtime_k with the used params over three 64-byte constant-bank lines;
vol_k / wvol_k / wfirst2_k: the x and w loads volatile (x first / w first) or w first without volatile.
"""
import triton
import triton.language as tl


@triton.jit
def static_k(x_ptr, w_ptr, y_ptr, N: tl.constexpr, EPS: tl.constexpr, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)[None, :]
    m = cols < N
    x = tl.load(x_ptr + cols, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    ss = tl.sum(x * x, axis=1)[:, None] / N
    tl.store(y_ptr + cols, (x * tl.rsqrt(ss + EPS) * w).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def runtime_k(x_ptr, w_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)[None, :]
    m = cols < n
    x = tl.load(x_ptr + cols, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    ss = tl.sum(x * x, axis=1)[:, None] / n
    tl.store(y_ptr + cols, (x * tl.rsqrt(ss + eps) * w).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9", "a10", "a11", "a12",
                               "a13", "a14", "a15"])
def many_k(x_ptr, w_ptr, y_ptr, n, eps, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15,
           BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)[None, :]
    m = cols < n
    x = tl.load(x_ptr + cols, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    ss = tl.sum(x * x, axis=1)[:, None] / n
    tl.store(y_ptr + cols, (x * tl.rsqrt(ss + eps) * w).to(y_ptr.dtype.element_ty), mask=m)




@triton.jit(do_not_specialize=["p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"])
def spread_k(x_ptr, p0, p1, p2, w_ptr, p3, p4, p5, y_ptr, p6, p7, p8, p9, n, eps, BLOCK: tl.constexpr):
    """runtime_k with its used parameters spread over three 64-byte lines of the parameter bank."""
    cols = tl.arange(0, BLOCK)[None, :]
    m = cols < n
    x = tl.load(x_ptr + cols, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    ss = tl.sum(x * x, axis=1)[:, None] / n
    tl.store(y_ptr + cols, (x * tl.rsqrt(ss + eps) * w).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def vol_k(x_ptr, w_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)[None, :]
    m = cols < n
    x = tl.load(x_ptr + cols, mask=m, other=0.0, volatile=True).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=m, other=0.0, volatile=True).to(tl.float32)
    ss = tl.sum(x * x, axis=1)[:, None] / n
    tl.store(y_ptr + cols, (x * tl.rsqrt(ss + eps) * w).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def wvol_k(x_ptr, w_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)[None, :]
    m = cols < n
    w = tl.load(w_ptr + cols, mask=m, other=0.0, volatile=True).to(tl.float32)
    x = tl.load(x_ptr + cols, mask=m, other=0.0, volatile=True).to(tl.float32)
    ss = tl.sum(x * x, axis=1)[:, None] / n
    tl.store(y_ptr + cols, (x * tl.rsqrt(ss + eps) * w).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def wfirst2_k(x_ptr, w_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)[None, :]
    m = cols < n
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + cols, mask=m, other=0.0).to(tl.float32)
    ss = tl.sum(x * x, axis=1)[:, None] / n
    tl.store(y_ptr + cols, (x * tl.rsqrt(ss + eps) * w).to(y_ptr.dtype.element_ty), mask=m)
