"""Runtime: environment, backend dispatch, devices, op registration, validation."""

from .device import DeviceInfo, device_info
from .dispatch import current_backend, use_backend, use_triton
from .env import Settings, reload_settings
from .library import register_op

__all__ = [
    "DeviceInfo",
    "device_info",
    "current_backend",
    "use_backend",
    "use_triton",
    "Settings",
    "reload_settings",
    "register_op",
]
