"""The one place that reads environment variables (documented in docs/ENV.md).

Settings are parsed once, at import, into a frozen :class:`Settings`; a bad
value raises :class:`~mlx_native.errors.ConfigError` naming the variable and
the values it accepts. Tests that change the environment call
:func:`reload_settings`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from ..errors import ConfigError

BACKENDS = ("auto", "reference", "triton")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


@dataclass(frozen=True)
class Settings:
    """Parsed environment.

    Attributes:
        backend: ``MLX_NATIVE_BACKEND``: "auto" (CUDA tensors -> Triton, CPU
            tensors -> reference, or Triton's interpreter when
            ``TRITON_INTERPRET=1``), "reference" or "triton".
        nan_fill: ``MLX_NATIVE_NAN_FILL``: pre-fill every op output with NaN
            (integers with -1) so unwritten elements show up in tests.
        triton_interpret: ``TRITON_INTERPRET`` (Triton's own variable): Triton
            kernels run on CPU tensors through Triton's interpreter.
        word_gemv: ``MLX_NATIVE_WORD_GEMV``: one-row quantized mat-vecs of the formats
            it takes run the word-level kernel (``ops/quant/gemv.py``); 0 selects the
            general qmm kernel for them.
        mmv: ``MLX_NATIVE_MMV``: which decode matmuls (1-16 bf16/fp16 rows of x) run the
            tensor-core decode kernel (``ops/quant/mmv.py``): "auto" (default) where it
            measured faster (``mmv.prefer``: MLX affine 4-bit on large matrices, GGUF Q4_K at 2-16 rows), "on"
            wherever it applies (MLX affine 4-bit, GGUF Q4_0/Q4_1/Q4_K), "off" nowhere; one-row
            calls that a streamed kernel takes (``affine_mv``, ``gguf_mv``) go there first.
        affine_mv: ``MLX_NATIVE_AFFINE_MV``: one-row matmuls of MLX affine 4-bit weights run the
            streamed mat-vec kernel (``ops/quant/affine_mv.py``), of 3/5/6-bit weights ``affine_mv_odd.py``,
            where their rows split into whole loop steps; 0 sends them to the kernels ``MLX_NATIVE_MMV``
            chooses between.
        affine_idot: ``MLX_NATIVE_AFFINE_IDOT``: those of them with a bf16/fp16 result run the
            integer-dot variant (``ops/quant/affine_idot.py``: x quantized to int16 per 32 values,
            ``dp2a``) where their rows split into its steps; 0 keeps them on ``affine_mv``.
        gguf_mv: ``MLX_NATIVE_GGUF_MV``: one-row matmuls of GGUF Q4_K, Q5_K, Q6_K, Q8_0, and of Q4_0 / Q4_1
            matrices large enough, and 2-4 rows of Q4_K / Q4_0 / Q4_1 run the streamed mat-vec kernels
            (``ops/ggml/q4k_mv.py``, ``q4k_idot_rows.py``, ``q6k_mv.py``, ``q8_mv.py``, ``q4_mv.py``); 0 sends them
            to the word-level or tensor-core kernels.
        ggml_idot: ``MLX_NATIVE_GGML_IDOT``: those of them on Q4_K, Q4_0 and Q4_1 rows run the integer-dot
            variants (``ops/ggml/q4k_idot.py``, ``q4k_idot_rows.py``, ``q4_idot.py``: x quantized to int16, ``dp2a``)
            where their rows split into its steps; 0 keeps them on ``q4k_mv`` / ``q4_mv``.
        pdl: ``MLX_NATIVE_PDL``: launch chains written for it (``moe_ffn``: route, gate/up, down; the batch-1
            split merge of decode attention) and the decode kernels that start with ``kernels.dependent.enter``
            (quantized mat-vecs, norms, rope, elementwise, decode attention) run as programmatic dependent
            launches on sm_90+ GPUs (each is scheduled while the one before finishes and waits for its results
            in the kernel); 0 launches them in plain stream order.
    """

    backend: str = "auto"
    nan_fill: bool = False
    triton_interpret: bool = False
    word_gemv: bool = True
    mmv: str = "auto"
    affine_mv: bool = True
    affine_idot: bool = True
    gguf_mv: bool = True
    ggml_idot: bool = True
    pdl: bool = True


def _parse_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name}={raw!r}: expected one of 1/0, true/false, yes/no, on/off")


def _parse_mode(env: Mapping[str, str], name: str, default: str) -> str:
    """"auto", or "on" / "off" from any boolean spelling."""
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value == "auto":
        return value
    if value in _TRUE:
        return "on"
    if value in _FALSE:
        return "off"
    raise ConfigError(f"{name}={raw!r}: expected auto, on (1/true/yes) or off (0/false/no)")


def _parse_choice(env: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value not in choices:
        raise ConfigError(f"{name}={raw!r}: expected one of {', '.join(choices)}")
    return value


def parse_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Parse ``env`` (default: ``os.environ``) into :class:`Settings`."""
    env = os.environ if env is None else env
    return Settings(
        backend=_parse_choice(env, "MLX_NATIVE_BACKEND", BACKENDS, "auto"),
        nan_fill=_parse_bool(env, "MLX_NATIVE_NAN_FILL", False),
        triton_interpret=_parse_bool(env, "TRITON_INTERPRET", False),
        word_gemv=_parse_bool(env, "MLX_NATIVE_WORD_GEMV", True),
        mmv=_parse_mode(env, "MLX_NATIVE_MMV", "auto"),
        affine_mv=_parse_bool(env, "MLX_NATIVE_AFFINE_MV", True),
        affine_idot=_parse_bool(env, "MLX_NATIVE_AFFINE_IDOT", True),
        gguf_mv=_parse_bool(env, "MLX_NATIVE_GGUF_MV", True),
        ggml_idot=_parse_bool(env, "MLX_NATIVE_GGML_IDOT", True),
        pdl=_parse_bool(env, "MLX_NATIVE_PDL", True),
    )


settings: Settings = parse_settings()


def reload_settings() -> Settings:
    """Re-read the environment (for tests); returns the new settings."""
    global settings
    settings = parse_settings()
    return settings
