from .api import flash_attn_decode, flash_attn_prefill, kv_cache_write, scaled_dot_product_attention
from .cache import KVCache

__all__ = ["flash_attn_prefill", "flash_attn_decode", "scaled_dot_product_attention", "kv_cache_write", "KVCache"]
