"""GGUF block formats: ggml_dequantize, ggml_matmul, ggml_embedding, ggml_to_affine."""
from .api import ggml_dequantize, ggml_embedding, ggml_matmul
from .repack import ggml_to_affine

__all__ = ["ggml_dequantize", "ggml_matmul", "ggml_embedding", "ggml_to_affine"]
