"""``get_soc()``: the machine's system-on-chip (Apple Silicon, then NVIDIA Jetson), as upstream orders them."""

from __future__ import annotations

from zeus.device.soc.apple import AppleSilicon, ZeusAppleInitError, apple_silicon_is_available
from zeus.device.soc.common import EmptySoC, SoC, SoCMeasurement, ZeusSoCInitError
from zeus.device.soc.jetson import Jetson, ZeusJetsonInitError, jetson_is_available

_soc: SoC | None = None


def get_soc() -> SoC:
    """The SoC, opened once; ``ZeusSoCInitError`` where none can be measured."""
    global _soc
    if _soc is not None:
        return _soc
    found: SoC | None = None
    try:
        if apple_silicon_is_available():
            found = AppleSilicon()
        elif jetson_is_available():
            found = Jetson()
    except (ZeusAppleInitError, ZeusJetsonInitError):
        found = None
    if found is None:
        raise ZeusSoCInitError("No observable SoC was found on the current machine.")
    _soc = found
    return _soc


__all__ = [
    "AppleSilicon",
    "EmptySoC",
    "Jetson",
    "SoC",
    "SoCMeasurement",
    "ZeusAppleInitError",
    "ZeusJetsonInitError",
    "ZeusSoCInitError",
    "apple_silicon_is_available",
    "get_soc",
    "jetson_is_available",
]
