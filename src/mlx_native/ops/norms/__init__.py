from .api import add_rms_norm, l2_norm, rms_norm

__all__ = ["rms_norm", "add_rms_norm", "l2_norm"]
