"""Row addressing shared by the row-wise kernels.

A row layout (see ``runtime.memory.RowLayout``) puts row ``r`` at
``(r // inner) * stride_outer + (r % inner) * stride_inner``. Division and
remainder run in int32 (rows < 2**31), the products in int64; single-level
layouts (``TWO_LEVEL=False``) skip the division.
"""

import triton
import triton.language as tl


@triton.jit
def row_offsets(rows, inner, stride_outer, stride_inner, TWO_LEVEL: tl.constexpr):
    """int64 element offsets of int32 ``rows``."""
    if TWO_LEVEL:
        return (rows // inner).to(tl.int64) * stride_outer + (rows % inner).to(tl.int64) * stride_inner
    else:
        return rows.to(tl.int64) * stride_inner
