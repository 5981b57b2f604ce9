"""The errors a part may raise, and what ``zeus`` does with each.

The exit status of ``zeus run`` follows from the class, so a plugin says what
kind of failure it hit by what it raises:

* :class:`PartMismatch` and :class:`DeviceError` (both ``ValueError``), and any
  ``ValueError`` a factory or ``plan`` raises: the input cannot work (bad
  option, infeasible plan, a device this machine cannot steer): exit 2, before
  or instead of running;
* :class:`RunFailed`: a part failed while the job ran; earlier results stay in
  the store: exit 1.

Every message names what is wrong and the fix.
"""

from __future__ import annotations


class PartMismatch(ValueError):
    """The chosen parts do not fit together (said plainly, before anything runs)."""


class RunFailed(RuntimeError):
    """A part failed while the job ran; earlier results stay in the store."""


class DeviceError(ValueError):
    """A device cannot be opened, read or steered; the message names the fix.

    A ``ValueError`` so that the runner reports it as a part that does not fit
    the machine (exit status 2) rather than as a crash.
    """
