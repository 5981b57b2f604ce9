"""A run's life from build to close, and how it stops on a signal: one owner for every way in.

:func:`run_to_end` runs a built-or-not :class:`~zeus_core.engine.runner.Runner` to its end: the
caller's ``run`` (build, run), then the parts closed (devices last, restoring their settings; a
signal meanwhile waits), then, after an error that kept what finished or a stop signal, the summary
of what finished read back from the store. What it prints is the caller's (callbacks), so that
``zeus run`` says each thing when it happens. :class:`Interrupts` turns SIGINT, SIGTERM and SIGHUP
into exceptions in the main thread, so that every ``finally`` runs; a process that owns its signals
(``zeus run``, ``zeus report``) installs it, a script's ``run_job`` does not.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

import attrs

from zeus_core.backends import StoreError
from zeus_core.errors import EXIT_FAILED, EXIT_OK, RunFailed, ZeusError

if TYPE_CHECKING:
    from zeus_core.engine.runner import Runner
    from zeus_core.results import JobSummary

#: Exit status of a run stopped by a signal: 128 + the signal's number, as shells report it.
SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}


class Terminated(BaseException):
    """SIGTERM or SIGHUP, raised in the main thread so that every ``finally`` runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def stopped_by(e: BaseException) -> signal.Signals:
    """The signal behind a KeyboardInterrupt or :class:`Terminated`."""
    return signal.Signals(getattr(e, "signum", signal.SIGINT))


class Interrupts:
    """How a run stops on a signal (``zeus run``, ``zeus report``): SIGINT raises KeyboardInterrupt (as Python's own handler does),
    SIGTERM and SIGHUP raise :class:`Terminated`, in the main thread, so that every ``finally`` runs (devices
    restored, outputs of what finished written). While :meth:`deferring` (devices being restored) a signal
    is only noted in :attr:`pending`. A signal this process was started ignoring (``nohup``, a job in a
    non-interactive shell's background) stays ignored."""

    def __init__(self) -> None:
        self.pending: int | None = None
        self._deferred = False
        self._previous: dict[int, Any] = {}

    def install(self) -> Interrupts:
        for s in SIGNAL_EXIT:
            current = signal.getsignal(s)
            if current is not signal.SIG_IGN:
                self._previous[s] = current
                signal.signal(s, self._on_signal)
        return self

    def uninstall(self) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)  # None: one set outside Python
        self._previous = {}

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if self._deferred:
            self.pending = self.pending or signum
            return
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(signum)

    @contextmanager
    def deferring(self) -> Iterator[None]:
        self._deferred = True
        try:
            yield
        finally:
            self._deferred = False


@attrs.define
class Ending:
    """How a run ended: its ``summary`` (None when nothing finished, or it could not be read back:
    ``summary_error``), the ``error`` that ended it early, the signal that ``stopped`` it (also one
    that came while the devices were restored), the ``close_error`` of devices that could not be
    restored, and the exit status all that makes (``code``)."""

    summary: JobSummary | None = None
    error: ZeusError | None = None
    stopped: signal.Signals | None = None
    close_error: RunFailed | None = None
    summary_error: StoreError | None = None
    code: int = EXIT_OK


def run_to_end(
    runner: Runner,
    run: Callable[[], JobSummary],
    *,
    interrupts: Interrupts | None = None,
    on_error: Callable[[ZeusError], object] = lambda e: None,
    on_stop: Callable[[signal.Signals], object] = lambda s: None,
    on_close_error: Callable[[RunFailed], object] = lambda e: None,
) -> Ending:
    """``run()`` (the caller's: build the runner, run it), then close the runner whatever happened
    (under ``interrupts.deferring()``: a signal then waits for the devices), then, on rank 0, the
    summary of what finished after an error marked ``partial`` or a stop signal. ``on_error``,
    ``on_stop`` and ``on_close_error`` are told each when it happens (before the devices close)."""
    ending = Ending()
    try:
        ending.summary = run()
    except ZeusError as e:
        ending.error, ending.code = e, e.exit_code
        on_error(e)
    except (KeyboardInterrupt, Terminated) as e:
        ending.stopped = stopped_by(e)
        ending.code = SIGNAL_EXIT[ending.stopped]
        on_stop(ending.stopped)
    finally:
        closing: AbstractContextManager[None] = interrupts.deferring() if interrupts is not None else nullcontext()
        with closing:
            try:
                runner.close()
            except RunFailed as e:
                ending.close_error = e
                ending.code = ending.code or EXIT_FAILED
                on_close_error(e)
    if interrupts is not None and interrupts.pending is not None and ending.stopped is None:  # came while the devices were restored
        ending.stopped = signal.Signals(interrupts.pending)
        ending.code = SIGNAL_EXIT[ending.stopped]
    partial = ending.error is not None and ending.error.partial
    if runner.leads and ending.summary is None and (partial or (ending.stopped is not None and "workload" in runner.parts)):
        try:
            ending.summary = runner.summary()  # what finished before the signal (or the partial error) is kept
        except StoreError as e:
            ending.summary_error = e
    return ending
