"""The errors zeus reports to its user, and the exit status each one means.

Every error a part, a plugin or the engine raises for the user to read is a
:class:`ZeusError`, and carries the exit status of the ``zeus`` command it ends
(:attr:`ZeusError.exit_code`), so the command line maps errors to exit codes in
one place. A plugin says what kind of failure it hit by what it raises:

* :class:`PartMismatch` and :class:`DeviceError` (also ``ValueError`` s), and any
  ``ValueError`` a factory or ``plan`` raises: the input cannot work (a bad
  option, an infeasible plan, a device this machine cannot steer): exit 2,
  before or instead of running;
  :class:`DeviceAbsent` (a :class:`DeviceError`) says the hardware or library is
  not on this machine at all, which tools that try every plugin do not report
  as an error;
* :class:`RunFailed` (also a ``RuntimeError``): a part failed while the job ran;
  earlier results stay in the store: exit 1.

Every message names what is wrong and the fix.
"""

from __future__ import annotations

#: ``zeus`` exit statuses: done, a failure while running, bad input (nothing was run).
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class ZeusError(Exception):
    """An error whose message is for the user; ``exit_code`` is the status ``zeus`` exits with.

    ``partial``: what the run finished before the error is reported and written (``--output``)
    before ``zeus`` exits with the error's status, as after a signal (a planner that completed
    some of its work sets it on the error it raises)."""

    exit_code: int = EXIT_FAILED
    partial: bool = False


class BadInput(ZeusError, ValueError):
    """Input that cannot work (a job file, an option, a store of another job): exit 2."""

    exit_code = EXIT_BAD_INPUT


class PartMismatch(BadInput):
    """The chosen parts do not fit together (said plainly, before anything runs)."""


class DeviceError(BadInput, RuntimeError):
    """A device cannot be opened, read or steered; the message names the fix.

    Bad input to the run (exit 2): the device does not fit this machine or
    this process. Also a ``RuntimeError``, as the vendor libraries' own
    failures are, so that ``except RuntimeError`` around device code catches it.
    """


class DeviceAbsent(DeviceError):
    """The hardware or the vendor library a device plugin needs is not on this machine.

    Raised by a device plugin's factory when there is nothing for it to open here
    (no NVIDIA driver, no ``amdsmi`` package, not a Jetson, not a Mac): the
    machine lacks it, rather than a fault to fix. Tools that try every installed
    plugin (``ZeusMonitor`` choosing its GPUs, ``zeus monitor``, ``zeus env``)
    report such a plugin as absent, not as an error; a job that names the
    plugin fails with it (exit 2), as with any :class:`DeviceError`. A simulated
    driver asked for and not found is a :class:`DeviceError`, not an absence.
    """


class PluginError(BadInput):
    """A plugin cannot be loaded or registers something invalid."""


class RunFailed(ZeusError, RuntimeError):
    """A part failed while the job ran; earlier results stay in the store: exit 1."""


__all__ = ["ZeusError", "BadInput", "PartMismatch", "DeviceError", "DeviceAbsent", "PluginError", "RunFailed"]
