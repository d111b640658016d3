from .api import RopeSpec, head_norm_rope, head_norm_rope_qk, rope, rope_multi, rope_qk

__all__ = ["rope", "rope_qk", "rope_multi", "head_norm_rope", "head_norm_rope_qk", "RopeSpec"]
