"""Device helper for loads that may be masked: :func:`load_or_zero`."""

import triton
import triton.language as tl


@triton.jit
def load_or_zero(p, mask):
    """``p``'s values, 0 where ``mask`` is False (``mask=None``: an unmasked load, no predicate)."""
    if mask is None:
        return tl.load(p)
    else:
        return tl.load(p, mask=mask, other=0)
