"""Device math helpers usable in every Triton build and in the interpreter.

``libdevice`` is not available under ``TRITON_INTERPRET=1``, so functions it
would provide are written here from ``tl`` primitives, accurate to a few fp32
ulps.
"""

import triton
import triton.language as tl


@triton.jit
def tanh(x):
    """tanh in fp32: odd Taylor series near 0 (no cancellation), exp form elsewhere."""
    ax = tl.abs(x)
    x2 = ax * ax
    # |x| < 0.25: x - x^3/3 + 2x^5/15 - 17x^7/315 + 62x^9/2835 (rel. error < 1e-8)
    small = ax * (1.0 + x2 * (-0.3333333333 + x2 * (0.1333333333 + x2 * (-0.0539682540 + x2 * 0.0218694885))))
    e = tl.exp(-2.0 * ax)
    large = (1.0 - e) / (1.0 + e)
    t = tl.where(ax < 0.25, small, large)
    return tl.where(x < 0, -t, t)


@triton.jit
def gelu_tanh(x):
    """GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    return 0.5 * x * (1.0 + tanh(inner))


@triton.jit
def gelu_erf(x):
    """Exact GELU: 0.5 x (1 + erf(x / sqrt(2)))."""
    return 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))


@triton.jit
def sigmoid(x):
    """1 / (1 + exp(-x)) in fp32, safe for large |x|."""
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def gated_act(g, ACT: tl.constexpr):
    """The gate activation of a fused gate/up pair: ``ACT`` 0 = SiLU, 1 = GELU (tanh)."""
    if ACT == 0:
        return g * sigmoid(g)
    else:
        return gelu_tanh(g)


@triton.jit
def sincos(x):
    """``(sin(x), cos(x))`` of fp32 ``x`` with one shared range reduction, within 2 fp32 ulps (abs. floor
    2**-24) for |x| < 2**17 (checked against fp64 on 2M points: 1.53 ulp).

    ``x = k * pi/2 + r``, |r| <= pi/4: ``k`` rounded from ``x * 2/pi``, ``r`` from three fused multiply-adds
    with pi/2 split in three fp32 parts; then the Cephes sinf/cosf minimax polynomials of ``r`` and the
    quadrant ``k mod 4``. libdevice's sinf and cosf each reduce ``x`` again and branch to a slow path.
    """
    k = tl.math.floor(x * 0.6366197723675814 + 0.5)
    r = tl.fma(k, -1.5707963705062866, x)
    r = tl.fma(k, 4.371138828673793e-08, r)
    r = tl.fma(k, 1.7763568394002505e-15, r)
    r2 = r * r
    s = r + r * r2 * (-1.6666654611e-1 + r2 * (8.3321608736e-3 + r2 * -1.9515295891e-4))
    c = 1.0 - 0.5 * r2 + r2 * r2 * (4.166664568298827e-2 + r2 * (-1.388731625493765e-3 + r2 * 2.443315711809948e-5))
    q = k.to(tl.int32)
    swap = (q & 1) != 0
    sv = tl.where(swap, c, s)
    cv = tl.where(swap, s, c)
    return tl.where((q & 2) != 0, -sv, sv), tl.where(((q + 1) & 2) != 0, -cv, cv)
