"""A process that owns the GPU's clock control, so training never blocks on the driver.

The controller builds its device in a child process (``make_device`` must be
picklable: a module-level function or a ``functools.partial`` of one) through
the device plugin API (:class:`zeus_core.parts.DeviceGroup`'s optional
``lock_clocks`` / ``reset_clocks``). It locks the SM clock to each requested
value (the device locks the memory clock as its hardware requires: the ``nvml``
device holds it at its maximum from the first lock on) and resets the clocks
when it stops: on ``close()``, when the training
process exits (``atexit``) or dies (the child notices its parent is gone), and
on SIGTERM / SIGINT / SIGHUP of the child. A SIGKILLed controller is covered by
the device plugin's journal, which the next ``zeus`` start restores.

Unlike the published controller, ``set_frequency`` waits (by default) until
the clock is locked, so the instruction that follows really runs at it; the
round trip is a pipe message, far below an instruction's duration.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import queue
import signal
from collections.abc import Callable
from typing import Any


RESET = "reset"  # request: reset the clocks, keep serving


class ControllerError(RuntimeError):
    """The controller process failed (its message carries the child's error)."""


def _serve(make_device: Callable[[], Any], requests: Any, replies: Any, parent: int) -> None:
    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    device = None
    try:
        device = make_device()
        for needed in ("lock_clocks", "reset_clocks"):
            if not callable(getattr(device, needed, None)):
                raise ControllerError(f"device {type(device).__name__} cannot {needed.replace('_', ' ')}; "
                                      "Perseus needs a device plugin with SM clock control")
        listed = getattr(device, "supported_clocks", None)
        replies.put(("ready", [int(c) for c in listed()] if callable(listed) else None))
        current = None
        while True:
            try:
                msg = requests.get(timeout=0.5)
            except queue.Empty:
                if os.getppid() != parent:  # the training process is gone
                    break
                continue
            if msg is None:
                break
            mhz, ack = msg
            try:
                if mhz == RESET:
                    device.reset_clocks()
                    current = None
                elif mhz != current:
                    device.lock_clocks(int(mhz))
                    current = mhz
                if ack:
                    replies.put(("ok", current))
            except Exception as e:  # noqa: BLE001 - reported to the caller, controller keeps running
                replies.put(("error", f"{type(e).__name__}: {e}"))
    except Exception as e:  # noqa: BLE001
        replies.put(("error", f"{type(e).__name__}: {e}"))
    finally:
        if device is not None:
            try:
                device.reset_clocks()
            finally:
                close = getattr(device, "close", None)
                if callable(close):
                    close()


class FrequencyController:
    """``set_frequency(mhz)`` locks the SM clock through a device in its own process."""

    def __init__(self, make_device: Callable[[], Any], wait: bool = True, start_timeout_s: float = 60.0) -> None:
        ctx = mp.get_context("spawn")
        self.wait = wait
        self._requests = ctx.Queue()
        self._replies = ctx.Queue()
        self.process = ctx.Process(target=_serve, args=(make_device, self._requests, self._replies, os.getpid()),
                                   daemon=True, name="zeus-perseus-frequency-controller")
        self.process.start()
        self._closed = False
        status, detail = self._reply(start_timeout_s)
        if status != "ready":
            self.process.join(5)
            raise ControllerError(f"frequency controller did not start: {detail}")
        #: SM clocks (MHz, highest first) the device supports, or None if it cannot list them: what a
        #: rank registers with the plan server as its ``available_frequencies``
        self.supported_clocks: list[int] | None = detail
        atexit.register(self.close)

    def _reply(self, timeout: float) -> tuple[str, Any]:
        try:
            return self._replies.get(timeout=timeout)
        except queue.Empty:
            alive = self.process.is_alive()
            return "error", f"no answer in {timeout:g} s (controller {'alive' if alive else 'exited'})"

    def set_frequency(self, mhz: int) -> None:
        """Lock the SM clock to ``mhz`` (0 = leave it); waits for the lock unless ``wait=False``."""
        if self._closed:
            raise ControllerError("the frequency controller is closed")
        if not mhz:
            return
        self._requests.put((int(mhz), self.wait))
        if self.wait:
            status, detail = self._reply(30.0)
            if status != "ok":
                raise ControllerError(f"cannot set {mhz} MHz: {detail}")

    def reset(self) -> None:
        """Reset the clocks now (the engine failed mid-step) and keep serving: the next
        ``set_frequency`` locks again. Always waits for the driver."""
        if self._closed:
            return
        self._requests.put((RESET, True))
        status, detail = self._reply(30.0)
        if status != "ok":
            raise ControllerError(f"cannot reset the clocks: {detail}")

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop the controller; it resets the clocks before it exits."""
        if self._closed:
            return
        self._closed = True
        try:
            self._requests.put(None)
        except (OSError, ValueError):
            pass
        self.process.join(timeout_s)
        if self.process.is_alive():  # pragma: no cover - a wedged driver call
            self.process.terminate()
            self.process.join(5)
        try:
            atexit.unregister(self.close)
        except Exception:  # noqa: BLE001
            pass

    def __enter__(self) -> FrequencyController:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
