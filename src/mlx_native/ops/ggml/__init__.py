"""GGUF block formats: ggml_dequantize, ggml_matmul, ggml_embedding."""
from .api import ggml_dequantize, ggml_embedding, ggml_matmul

__all__ = ["ggml_dequantize", "ggml_matmul", "ggml_embedding"]
