"""mlx-native: fused Triton kernels for LLM inference with MLX-compatible semantics.

CUDA tensors run Triton kernels; CPU tensors run an exact PyTorch reference
(or the Triton kernels under ``TRITON_INTERPRET=1``).
"""

from . import errors
from .errors import (
    BackendError,
    ConfigError,
    DeviceMismatchError,
    FormatError,
    InvalidArgumentError,
    MlxError,
    UnsupportedDTypeError,
    UnsupportedError,
)
from .ops.activations import gelu_mul, sigmoid_mul, silu_mul, softcap, softmax
from .ops.attention import KVCache, flash_attn_decode, flash_attn_prefill, kv_cache_write, scaled_dot_product_attention
from .ops.ggml import ggml_dequantize, ggml_embedding, ggml_matmul, ggml_to_affine
from .ops.moe import moe_ffn, moe_ggml_ffn, moe_ggml_matmul, moe_qmm, moe_route, moe_router, moe_weighted_reduce
from .ops.norms import add_rms_norm, l2_norm, rms_norm
from .ops.quant import dequantize, gather_qmm, quantize, quantized_embedding, quantized_matmul
from .ops.rope import RopeSpec, head_norm_rope, head_norm_rope_qk, rope, rope_multi, rope_qk
from .ops.sampling import argmax, sample
from .runtime import current_backend, device_info, use_backend

__version__ = "0.1.0"

# the model runner (last: it builds on the ops above)
from .generate import PrefillGraph, generate, load, stream_generate  # noqa: E402
