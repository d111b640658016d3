from .api import gelu_mul, sigmoid_mul, silu_mul, softcap, softmax

__all__ = ["silu_mul", "gelu_mul", "sigmoid_mul", "softcap", "softmax"]
