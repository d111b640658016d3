"""MLX affine quantization: quantize, dequantize, quantized_matmul, gather_qmm, and the decode fusions."""
from .api import dequantize, gather_qmm, quantize, quantized_embedding, quantized_matmul
from .matmul_norm import quantized_matmul_add_rms_norm

__all__ = ["quantize", "dequantize", "quantized_matmul", "gather_qmm", "quantized_embedding",
           "quantized_matmul_add_rms_norm"]
