"""Arrival counters: the last program of a group finishes the group's work in the same launch.

A split computation (split-KV attention, a split argmax) writes one partial result per program and
needs one more step that reads all of them. Instead of a second kernel, each program counts itself
in on an int32 counter of its group after publishing its partials; the program that arrives last
does the final step and sets the counter back to zero, so the next launch (or a CUDA-graph replay)
starts from zero again.

Memory ordering (the pattern of CUTLASS's split-K semaphores): a CTA barrier orders every thread's
stores before the counter's atomic, which one thread issues with release semantics at GPU scope; its
acquire half lets the last program read the other programs' partials (read them with
``cache_modifier=".cg"``: they were written by other SMs during the same launch).

Rules for callers: every program counted in the group's ``n_programs`` must arrive (split-K mat-vecs:
every split, an empty one included; split-KV decode: the splits that hold positions); a counter set must
not be shared by two launches in flight (two streams, or two replays of graphs captured from the
same plan at once); counters are zeroed outside CUDA-graph capture (:func:`counters`).
"""

from __future__ import annotations

from typing import Sequence

import torch
import triton
import triton.language as tl


@triton.jit
def arrive_last(cnt_ptr, n_programs):
    """Count this program in on ``cnt_ptr`` after its stores; True for the last of ``n_programs``."""
    tl.debug_barrier()
    arrived = tl.atomic_add(cnt_ptr, 1, sem="acq_rel", scope="gpu")
    return arrived == n_programs - 1


@triton.jit
def rearm(cnt_ptr):
    """Set a counter back to zero (by the last program, once it no longer needs the partials)."""
    tl.store(cnt_ptr, 0)


def counters(shape: Sequence[int], device: torch.device) -> torch.Tensor:
    """Zeroed int32 counters, one per group."""
    return torch.zeros(tuple(shape), dtype=torch.int32, device=device)


def can_fuse(device: torch.device) -> bool:
    """Counters can be created now: not on a CUDA stream that is being captured (a zero-fill inside a
    capture only runs at replay, so eager calls would start from garbage)."""
    return not (device.type == "cuda" and torch.cuda.is_current_stream_capturing())
