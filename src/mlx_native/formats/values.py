"""Typed reads of a checkpoint's settings (GGUF metadata, config.json): a count or a positive real, or a
FormatError naming the key and the value it holds."""

from __future__ import annotations

import math
import numbers
from typing import Any, Optional

import numpy as np

from ..errors import FormatError

REQUIRED = object()


def config_int(values: dict, key: str, where: str, default: Any = REQUIRED, most: int = 2**31 - 1,
               per_layer: bool = False) -> int:
    """The count ``values[key]``: an integer (or an integral float) in ``[1, most]``; ``default`` where absent or
    null (required when none is given); ``per_layer``: a per-layer list's first entry. ``where`` starts the message
    ("GGUF metadata", "llama config")."""
    value = values.get(key)
    if value is None:
        if default is REQUIRED:
            raise FormatError(f"{where}: required key {key} is missing")
        return default
    if per_layer and isinstance(value, (list, tuple, np.ndarray)) and len(value):
        value = value[0]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= most:
        raise FormatError(f"{where}: {key} = {value!r} is not an integer in [1, {most}]")
    return int(value)


def config_float(values: dict, key: str, where: str, default: Optional[float], zero_ok: bool = False
                 ) -> Optional[float]:
    """The finite positive (``zero_ok``: or zero) number ``values[key]``; ``default`` where absent or null."""
    value = values.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (0 <= value if zero_ok else 0 < value) \
            or not value < math.inf:
        raise FormatError(f"{where}: {key} = {value!r} is not a finite positive number")
    return float(value)
