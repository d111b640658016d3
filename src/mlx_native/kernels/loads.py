"""Device helpers for loads that may be masked: :func:`load_or_zero`, and :func:`tail_mask` for the partial last
loop step of a streamed mat-vec; :func:`pinned` for values a loop loads a step ahead."""

import triton
import triton.language as tl


@triton.jit
def load_or_zero(p, mask):
    """``p``'s values, 0 where ``mask`` is False (``mask=None``: an unmasked load, no predicate)."""
    if mask is None:
        return tl.load(p)
    else:
        return tl.load(p, mask=mask, other=0)


@triton.jit
def last_split():
    """Whether this program is the last K split of a streamed mat-vec (program axis 1)."""
    return tl.program_id(1) == tl.num_programs(1) - 1


@triton.jit
def tail_mask(idx, TAIL: tl.constexpr, last):
    """``idx < TAIL`` where ``last`` (the program that runs a partial last loop step of ``TAIL`` units: a mat-vec's
    last K split, :func:`last_split`, or every routed program of an unsplit row), all False elsewhere."""
    return idx < tl.where(last, TAIL, 0)


@triton.jit
def pinned(v, ASM: tl.constexpr):
    """``v`` (32-bit values) through an opaque register move (``ASM``; else ``v``), for a loop that loads the next
    step's values while this step uses its own: taken at the top of the step, the copy waits for the load made a step
    before, and the new load can go into the registers the loop carries. Left to the compiler, the copy into the
    loop's registers sat at the end of the step, right after the load it waits for (and values of 16 bits were
    packed there too), so the step ahead hid no latency (session 29, ``quant/mmv.py``, ``quant/affine_idot.py``)."""
    if ASM:
        return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [v], dtype=v.dtype, is_pure=False, pack=1)
    return v
