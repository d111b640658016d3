"""Triton helpers shared by the op families' kernels."""
