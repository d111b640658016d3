"""Low-overhead kernel launches.

``kernel[grid](...)`` costs 13-20 us of host time per call in Triton 3.x
(argument binding, specialization, a string cache key, device and stream
queries): on the H100 host that is three times what its C launcher alone
costs (13.5 vs 4.2 us, ``bench/overhead.py``). A :class:`Launch` is built
once per *plan* (one op at one signature: shapes, strides, dtypes,
constexprs, grid); its first call compiles the kernel through the regular
path, later calls go to the compiled kernel directly:

* **fast path** (Triton's per-signature C launcher, Triton 3.5-3.6): a
  function generated for the plan's argument list reads the tensors' raw
  pointers, checks that all of them are 16-byte aligned and that no launch
  hook is installed, and calls the C launcher with ints only;
* **general path** (any other case: a misaligned view, a profiler hook, a
  launcher of another layout): ``CompiledKernel.run`` with the variant
  compiled for that alignment pattern.

What Triton specializes on must not change between calls of one Launch:
every int argument that is not in the kernel's ``do_not_specialize`` list
must come from the plan (shapes, strides), and the 16-byte alignment of each
tensor argument is part of the lookup key. Under ``TRITON_INTERPRET=1`` the
regular path is always used.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, Callable, Iterator, Optional, Sequence

import torch

from ..runtime import env
from ..runtime.device import device_info

try:  # Triton >= 3.4
    from triton import knobs as _knobs
except ImportError:  # pragma: no cover - older Triton: regular launches only
    _knobs = None

_get_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)

# The C launcher's leading arguments in Triton 3.5-3.6: grid x/y/z, stream, function, cooperative, pdl,
# global scratch, profile scratch, kernel metadata, launch metadata, enter hook, exit hook.
_C_LAUNCHER_HEAD = "iiiKKppOOOOOO"


def _c_launcher(compiled: Any, pdl: bool) -> Optional[Callable]:
    """The per-signature C launch function of ``compiled``, when its layout is the one the fast path
    writes (:data:`_C_LAUNCHER_HEAD`), the kernel needs no scratch buffers and it was compiled for a
    programmatic dependent launch exactly when ``pdl``; otherwise None."""
    try:
        from triton.backends.nvidia import driver as nv_driver
    except ImportError:  # pragma: no cover - no CUDA backend
        return None
    run = compiled.run
    if getattr(nv_driver, "_BASE_ARGS_FORMAT", None) != _C_LAUNCHER_HEAD:
        return None
    if getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1):
        return None
    if getattr(run, "launch_cooperative_grid", True) or getattr(run, "launch_pdl", not pdl) != pdl:
        return None
    hooks = _knobs.runtime
    if not all(hasattr(getattr(hooks, h, None), "calls") for h in ("launch_enter_hook", "launch_exit_hook")):
        return None
    return getattr(run, "launch", None)


def _fast_caller(c_launch: Callable, compiled: Any, grid: tuple, device_index: int, n_args: int,
                 tensor_pos: Sequence[int], const_values: tuple, general: Callable, pdl: bool) -> Callable:
    """A function of the runtime arguments that launches ``compiled`` through ``c_launch``.

    It is generated for one argument list so that the per-call work is straight-line code: one
    ``data_ptr()`` per tensor, one alignment test for all of them, the stream query and the C call.
    Any call it cannot serve (a pointer not 16-byte aligned, an installed launch hook) goes to
    ``general`` with the same arguments.
    """
    names = [f"a{i}" for i in range(n_args)]
    passed = [f"p{i}" if i in tensor_pos else f"a{i}" for i in range(n_args)]
    lines = [f"def fast({', '.join(names)}):"]
    lines += [f"    p{i} = a{i}.data_ptr()" for i in tensor_pos]
    aligned = " | ".join(f"p{i}" for i in tensor_pos) or "0"
    lines += [
        f"    if ({aligned}) & 15 or hooks.launch_enter_hook.calls or hooks.launch_exit_hook.calls:",
        f"        return general({', '.join(names)})",
        f"    c_launch(g0, g1, g2, get_stream(dev), function, False, {pdl}, None, None, meta, None, None, None,"
        f" {', '.join(passed + [f'c{j}' for j in range(len(const_values))])})",
    ]
    scope = dict(c_launch=c_launch, g0=grid[0], g1=grid[1], g2=grid[2], get_stream=_get_stream, dev=device_index,
                 function=compiled.function, meta=compiled.packed_metadata, hooks=_knobs.runtime, general=general)
    scope.update({f"c{j}": v for j, v in enumerate(const_values)})
    exec("\n".join(lines), scope)  # noqa: S102 - code built above from argument counts only
    return scope["fast"]


def pdl_available(device: torch.device) -> bool:
    """Programmatic dependent launch can be used on ``device``: a CUDA device of sm_90 or newer, not under
    Triton's interpreter, and ``MLX_NATIVE_PDL`` allows it."""
    return (env.settings.pdl and not env.settings.triton_interpret and device.type == "cuda"
            and device_info(device).arch >= (9, 0))


def constexpr_names(kernel: Any) -> list[str]:
    """The names of a ``@triton.jit`` kernel's constexpr parameters (a JIT function's, or under the interpreter
    its Python function's annotations)."""
    params = getattr(kernel, "params", None)
    if params is not None:
        return [p.name for p in params if p.is_constexpr]
    sig = inspect.signature(kernel.fn)
    return [n for n, p in sig.parameters.items() if "constexpr" in str(p.annotation)]


class Launch:
    """A prepared launch of one ``@triton.jit`` kernel.

    Args:
        kernel: the JIT function.
        grid: launch grid (1 to 3 ints).
        constexprs: constexpr arguments by name (they must be the kernel's last
            parameters), every one of them, defaults included: the compiled kernel's
            launcher takes them all (a missing one is a ``TypeError`` here, also under
            the interpreter, which would fill in the default).
        num_warps, num_stages: compile options.
        pdl: launch as a programmatic dependent of the previous launch on the stream (Triton's
            ``launch_pdl``; the kernel must ``gdc_wait()`` before it reads that launch's results).
            Callers turn it on only where the device has it (sm_90+) and ``MLX_NATIVE_PDL`` allows it.

    Call with the runtime (non-constexpr) arguments in signature order; tensors
    must sit at the same positions in every call.
    """

    __slots__ = ("kernel", "grid", "constexprs", "options", "const_values", "compiled", "tensor_pos", "device_index",
                 "fast", "pdl")

    def __init__(self, kernel: Any, grid: Sequence[int], constexprs: dict[str, Any], num_warps: int,
                 num_stages: int | None = None, pdl: bool = False):
        self.kernel = kernel
        self.grid = (tuple(grid) + (1, 1))[:3]
        self.constexprs = constexprs
        self.options = {"num_warps": num_warps}
        if num_stages is not None:
            self.options["num_stages"] = num_stages
        self.pdl = pdl
        if pdl:
            self.options["launch_pdl"] = True
        missing = [n for n in constexpr_names(kernel) if n not in constexprs]
        if missing:
            raise TypeError(f"Launch of {getattr(kernel, '__name__', kernel)}: constexprs {missing} not given")
        names = getattr(kernel, "arg_names", None) or list(constexprs)
        self.const_values = tuple(constexprs[n] for n in names if n in constexprs)
        self.compiled: dict[tuple, Any] = {}
        self.tensor_pos: tuple[int, ...] | None = None
        self.device_index = 0
        self.fast: Optional[Callable] = None

    def __call__(self, *args: Any) -> None:
        if self.fast is not None:
            self.fast(*args)
            return
        if env.settings.triton_interpret or _knobs is None or _get_stream is None:
            self.kernel[self.grid](*args, **self.constexprs, **self.options)
            return
        self.general(*args)

    def general(self, *args: Any) -> None:
        """Launch through ``CompiledKernel.run`` (compiling the variant for the pointers' alignment on
        first use); once the all-aligned variant exists, set up the fast path."""
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
            if all(key):
                c_launch = _c_launcher(compiled, self.pdl)
                if c_launch is not None:
                    self.fast = _fast_caller(c_launch, compiled, self.grid, self.device_index, len(args), pos,
                                             self.const_values, self.general, self.pdl)
            return
        stream = _get_stream(self.device_index)
        hooks = _knobs.runtime
        meta = compiled.launch_metadata(self.grid, stream, *args, *self.const_values)
        # raw device pointers: the C launcher takes ints as they are, while a tensor costs it
        # a data_ptr() call and a driver query (arguments were validated before this point)
        args = list(args)
        for i, p in zip(pos, ptrs):
            args[i] = p
        g = self.grid
        compiled.run(g[0], g[1], g[2], stream, compiled.function, compiled.packed_metadata, meta,
                     hooks.launch_enter_hook, hooks.launch_exit_hook, *args, *self.const_values)


@contextlib.contextmanager
def recording(run: bool = True) -> Iterator[list]:
    """Record every prepared launch made inside the block as ``(Launch, args)`` in the yielded list, for tools
    that look at an op's real launches (``bench/overhead.py``'s launch floor, ``scripts/cbank_lines.py``).
    ``run=False``: the launches are recorded, not made."""
    seen: list = []
    call = Launch.__call__

    def record(self, *args):
        seen.append((self, args))
        if run:
            call(self, *args)

    Launch.__call__ = record
    try:
        yield seen
    finally:
        Launch.__call__ = call
