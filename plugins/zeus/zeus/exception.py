"""The base of every error this package raises (upstream's ``zeus.exception``)."""

from __future__ import annotations


class ZeusBaseError(Exception):
    """An error with a ``message`` attribute, which is also its ``str``."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        return self.message
