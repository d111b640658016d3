"""Token selection on the device: ``argmax`` (greedy) and ``sample`` (temperature, top-k, top-p, min-p)."""

from .api import argmax, sample

__all__ = ["argmax", "sample"]
