"""MLX affine quantization: quantize, dequantize, quantized_matmul, gather_qmm, quantized_embedding."""
from .api import dequantize, gather_qmm, quantize, quantized_embedding, quantized_matmul

__all__ = ["quantize", "dequantize", "quantized_matmul", "gather_qmm", "quantized_embedding"]
