"""Mixture of experts: routing, expert-grouped quantized matmuls, weighted reduce."""
from .api import moe_ggml_matmul, moe_qmm, moe_route, moe_weighted_reduce

__all__ = ["moe_route", "moe_qmm", "moe_ggml_matmul", "moe_weighted_reduce"]
