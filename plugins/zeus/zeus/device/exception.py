"""GPU errors under upstream's names; each is a ``ZeusBaseGPUError``, so ``except ZeusBaseGPUError`` catches them all."""

from __future__ import annotations

from zeus.exception import ZeusBaseError


class ZeusBaseGPUError(ZeusBaseError):
    """A GPU could not be opened, read or steered."""


class ZeusBaseCPUError(ZeusBaseError):
    """A CPU could not be opened or read."""


class ZeusBaseSoCError(ZeusBaseError):
    """A system-on-chip could not be opened or read."""


class ZeusdError(ZeusBaseGPUError):
    """The privileged daemon refused or could not be reached."""


class ZeusGPUInitError(ZeusBaseGPUError):
    """The GPU library could not start."""


class ZeusGPUInvalidArgError(ZeusBaseGPUError):
    """An argument the GPU refused."""


class ZeusGPUNotSupportedError(ZeusBaseGPUError):
    """The GPU does not support this."""


class ZeusGPUNoPermissionError(ZeusBaseGPUError):
    """The process lacks the privilege (CAP_SYS_ADMIN) for this."""


class ZeusGPUAlreadyInitializedError(ZeusBaseGPUError):
    """The library was started twice."""


class ZeusGPUNotFoundError(ZeusBaseGPUError):
    """No such GPU."""


class ZeusGPUInsufficientSizeError(ZeusBaseGPUError):
    """A buffer was too small."""


class ZeusGPUInsufficientPowerError(ZeusBaseGPUError):
    """The board lacks external power."""


class ZeusGPUDriverNotLoadedError(ZeusBaseGPUError):
    """The driver is not loaded."""


class ZeusGPUTimeoutError(ZeusBaseGPUError):
    """The GPU did not answer in time."""


class ZeusGPUIRQError(ZeusBaseGPUError):
    """An interrupt problem."""


class ZeusGPULibraryNotFoundError(ZeusBaseGPUError):
    """The vendor library is not installed."""


class ZeusGPUFunctionNotFoundError(ZeusBaseGPUError):
    """The library lacks this call."""


class ZeusGPUCorruptedInfoROMError(ZeusBaseGPUError):
    """The GPU's infoROM is corrupt."""


class ZeusGPULostError(ZeusBaseGPUError):
    """The GPU fell off the bus."""


class ZeusGPUResetRequiredError(ZeusBaseGPUError):
    """The GPU needs a reset."""


class ZeusGPUOperatingSystemError(ZeusBaseGPUError):
    """The operating system refused."""


class ZeusGPULibRMVersionMismatchError(ZeusBaseGPUError):
    """Library and kernel driver versions differ."""


class ZeusGPUMemoryError(ZeusBaseGPUError):
    """Out of memory."""


class ZeusGPUUnknownError(ZeusBaseGPUError):
    """An error the library could not name."""


class ZeusGPUHeterogeneousError(ZeusBaseGPUError):
    """The GPUs are not all of one model."""
