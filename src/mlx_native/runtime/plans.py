"""Per-signature plans: validation, layouts and launch configs computed once.

An op call is keyed by the metadata of its arguments (shapes, strides,
dtypes, devices) and its scalar arguments. The first call with a key
validates the arguments and builds a plan (layouts, grid, prepared launch);
later calls with the same key skip straight to the launch. Only successful
plans are stored, so bad input raises on every call.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Optional

import torch


def tensor_key(t: Optional[torch.Tensor]) -> Hashable:
    """The metadata of ``t`` that plans may depend on (None for a missing tensor)."""
    if t is None:
        return None
    if not isinstance(t, torch.Tensor):
        return ("not a tensor", type(t))  # the plan builder's validation raises
    return (t.shape, t.stride(), t.dtype, t.device)


EMPTY = "empty"  # plan of a call whose output has no elements


_ALL_CACHES: list["PlanCache"] = []


def clear_all() -> None:
    """Drop every cached plan (after changing launch-config constants, e.g. in sweeps)."""
    for cache in _ALL_CACHES:
        cache.clear()


class PlanCache:
    """A bounded dict of plans (cleared when full: shapes are few in practice)."""

    def __init__(self, build: Callable[..., Any], maxsize: int = 4096):
        self._build = build
        self._plans: dict[Hashable, Any] = {}
        self._maxsize = maxsize
        _ALL_CACHES.append(self)

    def get(self, key: Hashable, *args: Any) -> Any:
        """The plan for ``key``, built from ``args`` on first use (``build`` validates)."""
        plan = self._plans.get(key)
        if plan is None:
            plan = self._build(*args)
            if len(self._plans) >= self._maxsize:
                self._plans.clear()
            self._plans[key] = plan
        return plan

    def clear(self) -> None:
        self._plans.clear()
