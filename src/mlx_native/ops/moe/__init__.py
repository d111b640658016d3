"""Mixture of experts: routing, expert-grouped quantized matmuls, weighted reduce, the fused FFN step."""
from .api import moe_ffn, moe_ggml_ffn, moe_ggml_matmul, moe_qmm, moe_route, moe_router, moe_weighted_reduce

__all__ = ["moe_route", "moe_router", "moe_qmm", "moe_ggml_matmul", "moe_weighted_reduce", "moe_ffn", "moe_ggml_ffn"]
