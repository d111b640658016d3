"""Per-signature plans: validation, layouts and launch configs computed once.

An op call is keyed by the metadata of its arguments (shapes, strides,
dtypes, devices) and its scalar arguments. The first call with a key
validates the arguments and builds a plan (layouts, grid, prepared launch);
later calls with the same key skip straight to the launch. Only successful
plans are stored, so bad input raises on every call.

The ops on the decode path (norms, activations, rope) build their keys inline
as flat tuples, ``(x.shape, x.stride(), x.dtype, x.device, ..., scalars)``,
and look them up in :attr:`PlanCache.plans` directly (a function call per
tensor costs as much as the lookup); an argument that is not a tensor makes
the attribute reads raise, and the call then takes :meth:`PlanCache.build`
with the key None, whose validation raises. Other ops use :func:`tensor_key`
and :meth:`PlanCache.get`.
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
        self.plans: dict[Hashable, Any] = {}  # key -> plan; read directly on the hot path (``plans.get(key)``)
        self._maxsize = maxsize
        _ALL_CACHES.append(self)

    def get(self, key: Hashable, *args: Any) -> Any:
        """The plan for ``key``, built from ``args`` on first use (``build`` validates)."""
        plan = self.plans.get(key)
        if plan is None:
            plan = self.build(key, *args)
        return plan

    def build(self, key: Optional[Hashable], *args: Any) -> Any:
        """Build the plan of ``args`` (the builder validates them and raises on bad input) and store it
        under ``key``; None: not stored (a key could not be made, e.g. an argument is not a tensor)."""
        plan = self._build(*args)
        if key is not None:
            if len(self.plans) >= self._maxsize:
                self.plans.clear()
            self.plans[key] = plan
        return plan

    def clear(self) -> None:
        self.plans.clear()
