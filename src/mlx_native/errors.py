"""Typed errors of mlx-native.

Every error derives from :class:`MlxError` and also from the builtin that fits,
so ``except ValueError`` / ``except TypeError`` in user code keeps working.
Messages name the op, the argument, what was expected and what came, e.g.
``"rms_norm: weight has 4095 elements, expected 4096 (the last dim of x)"``.
"""

from __future__ import annotations


class MlxError(Exception):
    """Base class of every error raised by mlx-native."""


class InvalidArgumentError(MlxError, ValueError):
    """An argument has a bad value or shape (raised before any kernel launch)."""


class UnsupportedDTypeError(MlxError, TypeError):
    """A tensor has a dtype the op does not support."""


class DeviceMismatchError(MlxError, ValueError):
    """Tensors of one call live on different devices."""


class UnsupportedError(MlxError, NotImplementedError):
    """A valid request that this build does not implement (an architecture, a
    quantization type, a feature); the message lists what is supported."""


class FormatError(MlxError, ValueError):
    """A file (GGUF, safetensors, config) is malformed or truncated."""


class ConfigError(MlxError, ValueError):
    """An ``MLX_NATIVE_*`` environment variable has a value we cannot parse."""


class BackendError(MlxError, RuntimeError):
    """The requested backend cannot run here (e.g. Triton on CPU tensors
    without ``TRITON_INTERPRET=1``)."""


__all__ = [
    "MlxError",
    "InvalidArgumentError",
    "UnsupportedDTypeError",
    "DeviceMismatchError",
    "UnsupportedError",
    "FormatError",
    "ConfigError",
    "BackendError",
]
