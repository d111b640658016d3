"""Device helpers for loads that may be masked: :func:`load_or_zero`, and :func:`tail_mask` for the partial last
loop step of a streamed mat-vec."""

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
def tail_mask(idx, TAIL: tl.constexpr):
    """``idx < TAIL`` in the last K split of a streamed mat-vec (program axis 1), all False in the others: the
    members ``idx`` of a partial last loop step of ``TAIL`` units, which only the last split runs."""
    return idx < tl.where(tl.program_id(1) == tl.num_programs(1) - 1, TAIL, 0)
