"""Device capabilities, read once per device."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DeviceInfo:
    """What kernels need to know about a device.

    Attributes:
        name: device name ("NVIDIA H100 80GB HBM3", "cpu").
        sm_count: streaming multiprocessors (CPU: logical cores, for the
            interpreter's split heuristics).
        arch: compute capability (major, minor); (0, 0) on CPU.
        max_shared_mem: shared memory per block (opt-in maximum) in bytes.
        l2_bytes: L2 cache size in bytes (0 if unknown).
        total_memory: device memory in bytes.
    """

    name: str
    sm_count: int
    arch: tuple[int, int]
    max_shared_mem: int
    l2_bytes: int
    total_memory: int


@functools.lru_cache(maxsize=None)
def _cuda_info(index: int) -> DeviceInfo:
    props = torch.cuda.get_device_properties(index)
    smem = getattr(props, "shared_memory_per_block_optin", 0) or 48 * 1024
    return DeviceInfo(
        name=props.name,
        sm_count=props.multi_processor_count,
        arch=(props.major, props.minor),
        max_shared_mem=int(smem),
        l2_bytes=int(getattr(props, "L2_cache_size", 0)),
        total_memory=int(props.total_memory),
    )


_CPU_INFO = DeviceInfo(
    name="cpu", sm_count=os.cpu_count() or 1, arch=(0, 0), max_shared_mem=228 * 1024, l2_bytes=0, total_memory=0
)


def device_info(device: torch.device | str | int | None = None) -> DeviceInfo:
    """Capabilities of ``device`` (default: the current CUDA device, else CPU)."""
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else "cpu"
    device = torch.device(device) if not isinstance(device, int) else torch.device("cuda", device)
    if device.type != "cuda":
        return _CPU_INFO
    index = device.index if device.index is not None else torch.cuda.current_device()
    return _cuda_info(index)
