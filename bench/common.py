"""Benchmark plumbing shared by the family scripts.

Timing: CUDA events around a pass over several input sets (rotated so that
L2 does not hold the data of the next call), median over repetitions.
Two modes:
  * ``eager``: the Python calls as a user makes them, back to back; at small
    sizes this is bound by host overhead and launch latency;
  * ``graph``: the same pass captured in a CUDA graph and replayed: GPU time
    per call without host overhead.
Every case checks, before timing, that each peer computes the same result
as ours (a benchmark of a peer that does something else is worthless).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import platform
import statistics
import time
from typing import Any, Callable, Optional, Sequence

import torch

from report import CEILING

DEVICE = "cuda"  # bench/dry_run.py switches this to "cpu"
L2_ROTATE_BYTES = 256 << 20  # rotate input sets until this many bytes are touched per pass
MAX_SETS = 64
MIN_CALLS = 8  # calls per timed pass (sets are cycled) so one host launch latency is amortized
# decode rows: every implementation is timed in this many round-robin rounds and keeps its best median, so
# a row's order (what ran just before, e.g. a 22 ms math SDPA) does not decide it (session 6: one ragged
# row measured 230.9 us in the bench and 202 us in every order of scripts/ragged_probe.py)
DECODE_ROUNDS = 2
QUEUE_AHEAD_CYCLES = 2_000_000  # ~1 ms of GPU sleep queued before the start event


@dataclasses.dataclass
class Impl:
    """One implementation of a benchmarked op: ``fn(*inputs)``; ``tolerance`` for the agreement check. Named with
    ``report.CEILING`` first: a bound timed beside the implementations (no agreement check, not a peer)."""

    fn: Callable[..., Any]
    tolerance: float = 2e-2
    graph_ok: bool = True


@dataclasses.dataclass
class Case:
    """One op at one shape.

    ``make`` builds one fresh input set (a tuple of tensors). ``bytes`` is the
    minimum traffic (inputs read once + outputs written once); ``flops`` is
    optional. The implementation named "mlx-native" is ours.
    """

    family: str
    op: str
    shape: str
    dtype: str
    regime: str  # "large" or "decode"
    bytes: int
    make: Callable[[], tuple]
    impls: dict[str, Impl]
    flops: int = 0


def environment() -> dict[str, Any]:
    """GPU / software versions for the results header."""
    import triton

    info: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, sm_count=props.multi_processor_count,
                    gpu_memory_gib=round(props.total_memory / 2**30, 1))
    try:
        import liger_kernel  # noqa: F401
        from importlib.metadata import version

        info["liger_kernel"] = version("liger-kernel")
    except Exception:  # noqa: BLE001 - a missing peer is reported, not fatal
        info["liger_kernel"] = None
    return info


def copy_bandwidth(n_bytes: int = 2 << 30) -> float:
    """Measured device-to-device copy bandwidth in bytes/s (read + write counted)."""
    src = torch.empty(n_bytes, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n_bytes / statistics.median(times)


def input_set_count(n_bytes: int) -> int:
    """Input sets a case of ``n_bytes`` rotates through (L2 holds none of the next call's data)."""
    return max(1, min(MAX_SETS, math.ceil(L2_ROTATE_BYTES / max(n_bytes, 1))))


def _input_sets(case: Case) -> list[tuple]:
    return [case.make() for _ in range(input_set_count(case.bytes))]


def _time_pass(run_pass: Callable[[], None], reps: int, queue_ahead: bool = True) -> float:
    """Median microseconds of ``run_pass``; a GPU sleep queued first (``queue_ahead``) keeps the host's
    first launch out of the measured interval."""
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if queue_ahead:
            torch.cuda._sleep(QUEUE_AHEAD_CYCLES)
        start.record()
        run_pass()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)  # us
    return statistics.median(times)


def _cycled(sets: Sequence[tuple]) -> list[tuple]:
    return [sets[i % len(sets)] for i in range(max(MIN_CALLS, len(sets)))]


def time_eager(fn: Callable, sets: Sequence[tuple], reps: int = 20, queue_ahead: bool = True) -> float:
    """Median microseconds per call, calls issued back to back from Python.

    For small ops this is the host-bound rate a user's eager loop sees (``queue_ahead=False``: no GPU sleep
    queued first, which would hide up to ~1 ms of the pass's host time); for large ops it is GPU time (the
    host stays ahead of the GPU)."""
    calls = _cycled(sets)

    def run_pass():
        for s in calls:
            fn(*s)

    for _ in range(2):
        run_pass()
    torch.cuda.synchronize()
    return _time_pass(run_pass, reps, queue_ahead) / len(calls)


def time_graph(fn: Callable, sets: Sequence[tuple], reps: int = 20) -> Optional[float]:
    """Median microseconds per call of the same pass replayed from a CUDA graph (None if not capturable)."""
    sets = _cycled(sets)
    for s in sets:
        fn(*s)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for s in sets:  # warm up on the side stream, as graph capture requires
                fn(*s)
        torch.cuda.current_stream().wait_stream(stream)
        with torch.cuda.graph(graph):
            for s in sets:
                fn(*s)
    except Exception:  # noqa: BLE001 - some peers cannot be captured
        return None
    graph.replay()
    torch.cuda.synchronize()
    t = _time_pass(graph.replay, reps) / len(sets)
    del graph
    return t


def time_any(fn: Callable, sets: Sequence[tuple], reps: int = 20) -> float:
    """:func:`time_graph`, or :func:`time_eager` where the pass cannot be captured."""
    t = time_graph(fn, sets, reps)
    return t if t is not None else time_eager(fn, sets, reps)


def rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    """Largest absolute difference of ``got`` from ``want`` over ``want``'s largest magnitude (at least 1e-6)."""
    return (got.float() - want.float()).abs().max().item() / max(want.float().abs().max().item(), 1e-6)


def time_graph_rounds(fns: dict[str, Callable], sets: Sequence[tuple], rounds: int) -> dict[str, float]:
    """Best of ``rounds`` interleaved rounds of :func:`time_graph` for each function (A/B runs: every
    candidate sees the same host and clock minutes)."""
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name, fn in fns.items():
            t = time_graph(fn, sets)
            best[name] = min(t, best.get(name, t))
    return best


def host_overhead_us(fn: Callable, args: tuple, n: int = 2000, trials: int = 5) -> float:
    """Host microseconds to issue one call (no sync inside the loop): the best of ``trials`` loops of
    ``n // trials`` calls (the host is shared, and noise only adds time)."""
    for _ in range(50):
        fn(*args)
    torch.cuda.synchronize()
    per = max(1, n // trials)
    best = float("inf")
    for _ in range(trials):
        t0 = time.perf_counter()
        for _ in range(per):
            fn(*args)
        best = min(best, time.perf_counter() - t0)
        torch.cuda.synchronize()
    return best / per * 1e6


def cprofile(fn: Callable[[], Any], n: int, top: int = 20) -> None:
    """Print a cProfile of ``n`` calls of ``fn`` (after 100 warm-up calls), sorted by own time."""
    import cProfile
    import pstats

    for _ in range(100):
        fn()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        fn()
    prof.disable()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def _flatten(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for t in out if isinstance(t, torch.Tensor)]


def check_agreement(case: Case) -> dict[str, float]:
    """Relative max error of each peer's output against ours on one input set."""
    inputs = case.make()

    def fresh():  # peers may write their inputs in place
        return [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]

    ours = _flatten(case.impls["mlx-native"].fn(*fresh()))
    errors = {}
    for name, impl in case.impls.items():
        if name == "mlx-native" or name.startswith(CEILING):
            continue
        try:
            theirs = _flatten(impl.fn(*fresh()))
        except Exception as exc:  # noqa: BLE001 - a peer that cannot run this shape
            errors[name] = f"unsupported: {exc!r}"[:160]
            continue
        err = 0.0
        for a, b in zip(ours, theirs):
            scale = a.float().abs().max().item() or 1.0
            err = max(err, (a.float() - b.float()).abs().max().item() / scale)
        errors[name] = err
        if not err <= impl.tolerance:
            raise AssertionError(f"{case.op} {case.shape}: peer {name} differs from ours by {err:.2e} (relative)")
    return errors


def run_case(case: Case, modes: Sequence[str], reps: int = 20) -> dict[str, Any]:
    """Time every implementation of ``case``; returns a result row."""
    agreement = check_agreement(case)
    unsupported = {k for k, v in agreement.items() if isinstance(v, str)}
    sets = _input_sets(case)
    row: dict[str, Any] = {k: getattr(case, k) for k in ("family", "op", "shape", "dtype", "regime", "bytes", "flops")}
    row["agreement"] = agreement
    row["n_sets"] = len(sets)
    for mode in modes:
        times = {}
        for _ in range(DECODE_ROUNDS if case.regime == "decode" else 1):
            for name, impl in case.impls.items():
                if name in unsupported or (mode == "graph" and not impl.graph_ok):
                    continue
                t = (time_eager(impl.fn, sets, reps, queue_ahead=case.regime != "decode") if mode == "eager"
                     else time_graph(impl.fn, sets, reps))
                if t is not None:
                    times[name] = min(t, times.get(name, t))
        row[f"{mode}_us"] = times
    del sets
    torch.cuda.empty_cache()
    return row


def save_json(path: str, payload: Any) -> None:
    with open(path, "w") as f:
        json.dump(payload, f, indent=1, default=str)


def save_sweep(path: str, rows: list[dict], key: Callable[[dict], tuple]) -> dict[tuple, float]:
    """Write a sweep's rows (with the environment) to ``path``; return the smallest ``us`` per ``key(row)`` of the
    timed rows (a sweep times each variant in several rounds)."""
    save_json(path, dict(environment=environment(), rows=rows))
    best: dict[tuple, float] = {}
    for r in rows:
        if r.get("us"):
            best[key(r)] = min(best.get(key(r), float("inf")), r["us"])
    return best
