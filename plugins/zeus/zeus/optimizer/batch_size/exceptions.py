"""Errors of the batch-size optimizer client (upstream's names; each a ``ZeusBaseError``)."""

from __future__ import annotations

from zeus.exception import ZeusBaseError


class ZeusBSORuntimError(ZeusBaseError):
    """The server answered with an error, or with something the client cannot use."""


class ZeusBSOTrainFailError(ZeusBaseError):
    """The server stopped this training before it reached the target (relaunch: another batch size is chosen)."""


class ZeusBSOConfigError(ZeusBaseError):
    """The job cannot run as configured (no GPU, ...)."""


class ZeusBSOOperationOrderError(ZeusBaseError):
    """A method was called before the one it needs (``get_batch_size`` first)."""


class ZeusBSOBadOperationError(ZeusBaseError):
    """An operation this process may not do (only rank 0 asks for a batch size)."""
