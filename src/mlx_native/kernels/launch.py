"""Low-overhead kernel launches.

``kernel[grid](...)`` costs 15-20 us of host time per call in Triton 3.x
(argument binding, specialization, a string cache key, device and stream
queries). A :class:`Launch` is built once per *plan* (one op at one
signature: shapes, strides, dtypes, constexprs, grid) and, after its first
call compiled the kernel through the regular path, calls the compiled kernel
directly.

What Triton specializes on must not change between calls of one Launch:
every int argument that is not in the kernel's ``do_not_specialize`` list
must come from the plan (shapes, strides), and the 16-byte alignment of each
tensor argument is part of the lookup key. Under ``TRITON_INTERPRET=1`` the
regular path is always used.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from ..runtime import env

try:  # Triton >= 3.4
    from triton import knobs as _knobs
except ImportError:  # pragma: no cover - older Triton: regular launches only
    _knobs = None

_get_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


class Launch:
    """A prepared launch of one ``@triton.jit`` kernel.

    Args:
        kernel: the JIT function.
        grid: launch grid (1 to 3 ints).
        constexprs: constexpr arguments by name (they must be the kernel's last
            parameters).
        num_warps, num_stages: compile options.

    Call with the runtime (non-constexpr) arguments in signature order.
    """

    __slots__ = ("kernel", "grid", "constexprs", "options", "const_values", "compiled", "tensor_pos", "device_index")

    def __init__(self, kernel: Any, grid: Sequence[int], constexprs: dict[str, Any], num_warps: int,
                 num_stages: int | None = None):
        self.kernel = kernel
        self.grid = (tuple(grid) + (1, 1))[:3]
        self.constexprs = constexprs
        self.options = {"num_warps": num_warps}
        if num_stages is not None:
            self.options["num_stages"] = num_stages
        names = getattr(kernel, "arg_names", None) or list(constexprs)
        self.const_values = tuple(constexprs[n] for n in names if n in constexprs)
        self.compiled: dict[tuple, Any] = {}
        self.tensor_pos: tuple[int, ...] | None = None
        self.device_index = 0

    def __call__(self, *args: Any) -> None:
        if env.settings.triton_interpret or _knobs is None or _get_stream is None:
            self.kernel[self.grid](*args, **self.constexprs, **self.options)
            return
        if self.tensor_pos is None:
            self.tensor_pos = tuple(i for i, a in enumerate(args) if isinstance(a, torch.Tensor))
            self.device_index = args[self.tensor_pos[0]].device.index
        pos = self.tensor_pos
        ptrs = [args[i].data_ptr() for i in pos]
        key = tuple(p & 15 == 0 for p in ptrs)
        compiled = self.compiled.get(key)
        if compiled is None:
            compiled = self.kernel[self.grid](*args, **self.constexprs, **self.options)
            compiled._init_handles()
            self.compiled[key] = compiled
            return
        stream = _get_stream(self.device_index)
        # raw device pointers: the C launcher takes ints as they are, while a tensor costs it
        # a data_ptr() call and a driver query (arguments were validated before this point)
        args = list(args)
        for i, p in zip(pos, ptrs):
            args[i] = p
        g = self.grid
        compiled.run(g[0], g[1], g[2], stream, compiled.function, compiled.packed_metadata, None,
                     _knobs.runtime.launch_enter_hook, _knobs.runtime.launch_exit_hook, *args, *self.const_values)
