"""Decode kernels as programmatic dependent launches (PDL, sm_90+).

A decode step is a chain of small launches, and each one's launch latency and ramp sit between the
previous launch's last wave and its own first loads. Launched as a programmatic dependent
(:func:`dependent_launch`), a kernel's programs can be scheduled while the launch before it finishes. Such a
program must not read what that launch writes, nor write anything, before ``griddepcontrol.wait``; a
kernel that starts with :func:`enter` does nothing before it but, at most, ask L2 for lines of its own
constant operands (:func:`prefetch_vector_l2`: a hint that reads nothing into registers and writes nothing), so it
is safe after any launch.
``launch_dependents`` (``PDL`` 2) then lets the next dependent launch be scheduled as soon as every program
of this one has started; without it (1) that happens when they exit.

Measured on the H100 (session 22 run 6, CUDA-graph replay of 4 calls back to back, A/B in one process):
decode norms, head_norm_rope and silu_mul 1.15-1.37x faster with the early trigger (rms_norm 1x576 1.59 ->
1.20 us; 1.33 us waiting only). The mat-vecs gain 1-5% from waiting first; the early trigger added 2-4% on
some (the one-row MLX kernel on the 8B MLP shapes, Q6_K, the Q4_K rows kernel) and cost 4-17% on others
(Q4_0 / Q4_1 and Q8_0 one-row kernels on 14336 x 4096 and 4096 x 4096, the MLX rows kernel, the tensor-core
decode kernel 16-20%), so each plan says whether it triggers. Those (but the tensor-core kernel) trigger after
their main loop instead (``PDL`` 3, :func:`leave_loop`; session 23 run 1, on an H200, against waiting only):
one-row Q4_0 / Q4_K / Q8_0 1-4% faster, MLX 2-row 4096 x 4096 3.7%; the tensor-core kernel gained 3% on
4096 x 14336 but lost 4-6% on 14336 x 4096 and 4096 x 4096, so it only waits.

Tried and dropped (branch ``mv-pdl``): asking L2 for the program's weight bytes
(``cp.async.bulk.prefetch.L2``, safe before the wait since L2 is coherent) made the one-row MLX mat-vec
8-19% slower than waiting first: every program, not only the first wave, issued them, each through a loop
over the warp's distinct addresses (the instruction takes warp-uniform operands). Also dropped (branch
``weights-first``, session 24 run 5, H100): the one-row integer-dot mat-vecs loading their first weight tiles
before the wait (safe only where the launch before does not write the weights, so it would have needed an
opt-in). Alone in a chain the MLX kernel gained 10% at 4096 x 4096 (62.8 -> 69.1% of copy) and 1-2% on the 8B
MLP shapes, Q4_0 0-1%, and Q4_K lost 4-30%; in the 8B-shaped decode MLX lost 1.1%, Q4_K 2.1%, Q4_0 gained
0.9%.

Kept (session 47, H200): the decode norm and head-norm-rope launches ask L2 for their weight vectors (a few KiB,
one ``prefetch.global.L2`` per line) before the wait. A step streams far more weight bytes than L2 holds, so those
vectors come from DRAM, and without the prefetch their latency followed the wait. Qwen3-30B-A3B-shaped decode MLX
4-bit +1.1-1.3%, Q4_K +0.6-0.9%, SmolLM2-shaped +1.8%, Llama-3-8B-shaped (two norm launches a step) a tie."""

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from ..runtime import env
from .launch import Launch, pdl_available


EARLY_TRIGGER = True  # False: no kernel lets the next launch be scheduled before its programs exit


def pdl_mode(device: torch.device, trigger) -> int:
    """The ``PDL`` constexpr of a kernel that starts with :func:`enter`: 0 a plain launch, 1 a programmatic
    dependent launch (where :func:`~mlx_native.kernels.launch.pdl_available`) that waits first, 2 one that also
    lets the next launch be scheduled right after (``trigger`` True), 3 one that does so after its main loop
    (``trigger == "late"``; the kernel calls :func:`leave_loop` there); :func:`dependent_launch` launches it so."""
    if not pdl_available(device):
        return 0
    if not trigger or not EARLY_TRIGGER:
        return 1
    return 3 if trigger == "late" else 2


def dependent_launch(kernel, grid, constexprs: dict, device, trigger, dependent: bool = True, **options) -> Launch:
    """A :class:`~mlx_native.kernels.launch.Launch` of a kernel that starts with :func:`enter`: its ``PDL``
    constexpr is :func:`pdl_mode` (0 with ``dependent`` False: a plain launch, for callers whose launch before may
    not be a dependent chain's) and it is launched as a programmatic dependent exactly when that is nonzero."""
    mode = pdl_mode(torch.device(device), trigger) if dependent else 0
    return Launch(kernel, grid, dict(constexprs, PDL=mode), pdl=mode > 0, **options)


@triton.jit
def enter(PDL: tl.constexpr):
    """``PDL`` >= 1: wait for the launch before (its writes are visible after this); 2: then let the next
    dependent launch be scheduled. Call it first, before any load or store."""
    if PDL >= 1:
        gdc_wait()
    if PDL == 2:
        gdc_launch_dependents()


@triton.jit
def prefetch_l2(ptrs, ASM: tl.constexpr):
    """Ask L2 for the 128-byte lines at ``ptrs`` (one ``prefetch.global.L2`` per element; a hint: safe before
    ``griddepcontrol.wait``, since L2 is where every write lands). Without ``ASM`` (the interpreter): nothing."""
    if ASM:
        tl.inline_asm_elementwise("prefetch.global.L2 [$1]; mov.u32 $0, 0;", "=r,l", [ptrs], dtype=tl.int32,
                                  is_pure=False, pack=1)


@triton.jit
def prefetch_vector_l2(ptr, NBYTES: tl.constexpr, LINES: tl.constexpr):
    """Ask L2 for the ``LINES`` (a power of two covering ``NBYTES``, or 0: nothing) 128-byte lines of the
    vector at ``ptr``. A decode launch calls it before :func:`enter` for its small constant operands (norm
    weights): they are rarely still in L2, and their DRAM latency then overlaps the wait for the launch before
    instead of following it."""
    if LINES > 0:
        lines = tl.minimum(tl.arange(0, LINES) * 128, NBYTES - 1)
        prefetch_l2(ptr.to(tl.pointer_type(tl.int8)) + lines, True)


def prefetch_lines(nbytes: int, device) -> int:
    """``LINES`` of :func:`prefetch_vector_l2` for a vector of ``nbytes`` read by a launch on ``device``: 0 off
    CUDA, in the interpreter or without programmatic dependent launch (no wait to hide the latency behind)."""
    if nbytes <= 0 or env.settings.triton_interpret or not pdl_available(torch.device(device)):
        return 0
    return triton.next_power_of_2(triton.cdiv(nbytes, 128))


@triton.jit
def leave_loop(PDL: tl.constexpr):
    """``PDL`` 3: let the next dependent launch be scheduled now (call it after the main loop, before the
    epilogue: the next launch's programs then take SM slots only as this one's programs finish streaming)."""
    if PDL == 3:
        gdc_launch_dependents()
