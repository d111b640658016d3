"""Static, preallocated KV cache of one attention layer (linear or ring buffer)."""

from __future__ import annotations

from typing import Optional, Union

import torch

from ...errors import InvalidArgumentError
from ...runtime import checks
from .api import flash_attn_decode, kv_cache_write


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidArgumentError(f"KVCache: {name} must be a positive int, got {value!r}")
    return value


class KVCache:
    """A static KV cache: ``k``, ``v`` ``[B, Hkv, capacity, D]`` and device ``lens [B]`` int32.

    Allocated once, written in place by :func:`kv_cache_write`, read by
    :func:`flash_attn_decode`; every method is free of host syncs, so a decode
    step that writes and attends can be captured in a CUDA graph and replayed
    (``lens`` advances on the device).

    * ``window=None``: linear cache, position ``p`` in slot ``p``; holds
      ``capacity`` tokens per sequence.
    * ``window=W``: ring buffer for sliding-window layers, position ``p`` in slot
      ``p % capacity``; ``capacity`` defaults to ``W`` and must be ``>= W``
      (``>= W + Lq - 1`` to decode ``Lq`` tokens per step).

    Args:
        batch, n_kv_heads, head_dim: cache geometry (``head_dim`` a multiple of 8, <= 512).
        capacity: positions per sequence (required for a linear cache).
        window: sliding window size, or None.
        dtype, device: of ``k`` and ``v``.
        lens: optional int32 ``[batch]`` tensor to share between layers
            (then write with ``advance=False`` and advance it once per step).

    Example:
        >>> cache = mn.KVCache(8, 8, 128, capacity=32768, dtype=torch.bfloat16, device="cuda")
        >>> cache.write(k_prompt, v_prompt)                 # [8, 8, L, 128]
        >>> out = cache.attend(q_step)                      # after cache.write(k_step, v_step)
    """

    def __init__(self, batch: int, n_kv_heads: int, head_dim: int, capacity: Optional[int] = None, *,
                 window: Optional[int] = None, dtype: torch.dtype = torch.bfloat16,
                 device: Union[str, torch.device] = "cuda", lens: Optional[torch.Tensor] = None):
        _positive_int("batch", batch)
        _positive_int("n_kv_heads", n_kv_heads)
        _positive_int("head_dim", head_dim)
        if head_dim % 8 or head_dim > 512:
            raise InvalidArgumentError(f"KVCache: head_dim {head_dim} must be a multiple of 8 up to 512")
        if window is not None:
            _positive_int("window", window)
            capacity = window if capacity is None else capacity
        if capacity is None:
            raise InvalidArgumentError("KVCache: a linear cache (window=None) needs a capacity")
        _positive_int("capacity", capacity)
        if window is not None and capacity < window:
            raise InvalidArgumentError(f"KVCache: capacity {capacity} is smaller than the window {window}")
        if dtype not in checks.FLOAT_DTYPES:
            raise InvalidArgumentError(f"KVCache: dtype must be float32/float16/bfloat16, got {dtype}")
        self.window = window
        self.capacity = capacity
        self.k = torch.zeros(batch, n_kv_heads, capacity, head_dim, dtype=dtype, device=device)
        self.v = torch.zeros_like(self.k)
        if lens is None:
            lens = torch.zeros(batch, dtype=torch.int32, device=self.k.device)
        elif lens.dtype != torch.int32 or lens.shape != (batch,) or lens.device != self.k.device:
            raise InvalidArgumentError(
                f"KVCache: lens must be int32 [{batch}] on {self.k.device}, got {lens.dtype} "
                f"{tuple(lens.shape)} on {lens.device}"
            )
        self.lens = lens

    @property
    def ring(self) -> bool:
        return self.window is not None

    def write(self, k_new: torch.Tensor, v_new: torch.Tensor, n_new: Optional[torch.Tensor] = None, *,
              advance: bool = True) -> None:
        """Append ``[B, Hkv, L_new, D]`` keys/values (see :func:`kv_cache_write`)."""
        kv_cache_write(self.k, self.v, self.lens, k_new, v_new, ring=self.ring, n_new=n_new, advance=advance)

    def attend(self, q: torch.Tensor, *, scale: Optional[float] = None, softcap: Optional[float] = None
               ) -> torch.Tensor:
        """Decode attention of ``q [B, Hq, Lq, D]`` (its K/V already written) over this cache."""
        return flash_attn_decode(q, self.k, self.v, self.lens, scale=scale, window=self.window, softcap=softcap)

    def prefix(self, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Views ``k[:, :, :length]``, ``v[:, :, :length]`` of a linear cache (for chunked prefill)."""
        if self.ring:
            raise InvalidArgumentError("KVCache.prefix: a ring cache has no contiguous prefix; use attend()")
        if not 0 <= length <= self.capacity:
            raise InvalidArgumentError(f"KVCache.prefix: length {length} is outside [0, {self.capacity}]")
        return self.k[:, :, :length], self.v[:, :, :length]

    def reset(self) -> None:
        """Forget every token (``lens = 0``); the buffers are kept."""
        self.lens.zero_()
