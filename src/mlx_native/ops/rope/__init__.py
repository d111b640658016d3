from .api import head_norm_rope, rope, rope_multi

__all__ = ["rope", "rope_multi", "head_norm_rope"]
