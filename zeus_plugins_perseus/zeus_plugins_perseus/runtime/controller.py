"""A process that owns the GPU's clock control, so training never blocks on the driver.

The controller builds its device in a child process (``make_device`` must be
picklable: a module-level function or a ``functools.partial`` of one) through
the device plugin API (:class:`zeus_core.parts.DeviceGroup`'s optional
``lock_clocks`` / ``reset_clocks``). It locks the SM clock to each requested
value (the device locks the memory clock as its hardware requires: the ``nvml``
device holds it at its maximum from the first lock on) and resets the clocks
when it stops: on ``close()``, when the training
process exits (``atexit``) or dies (the child sees its pipe close, or its
parent change), and on SIGTERM / SIGINT / SIGHUP of the child. A SIGKILLed
controller is covered by the device plugin's journal, which the next ``zeus``
start restores.

The child is a fresh interpreter (``python -m zeus_plugins_perseus.runtime.controller_process``)
talking over two pipes of its own, not a ``multiprocessing`` spawn: a spawned
child re-imports the training script (``__main__``) and with it torch and
whatever the script does at import, which cost seconds per rank and runs user
code twice. The parent's ``sys.path`` is sent first, so ``make_device`` unpickles
as it would in the parent.

Unlike the published controller, ``set_frequency`` waits (by default) until
the clock is locked, so the instruction that follows really runs at it; the
round trip is a pipe message, far below an instruction's duration.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

RESET = "reset"  # request: reset the clocks, keep serving


class ControllerError(RuntimeError):
    """The controller process failed (its message carries the child's error)."""


def _serve(make_device: Callable[[], Any], requests: Connection, replies: Connection, parent: int) -> None:
    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    device = None
    try:
        device = make_device()
        for needed in ("lock_clocks", "reset_clocks"):
            if not callable(getattr(device, needed, None)):
                raise ControllerError(
                    f"device {type(device).__name__} cannot {needed.replace('_', ' ')}; Perseus needs a device plugin with SM clock control"
                )
        listed = getattr(device, "supported_clocks", None)
        replies.send(("ready", [int(c) for c in listed()] if callable(listed) else None))
        current = None
        while True:
            if not requests.poll(0.5):
                if os.getppid() != parent:  # the training process is gone
                    break
                continue
            msg = requests.recv()  # EOFError when the training process is gone
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
                    replies.send(("ok", current))
            except Exception as e:  # noqa: BLE001 - reported to the caller, controller keeps running
                replies.send(("error", f"{type(e).__name__}: {e}"))
    except EOFError:
        pass
    except Exception as e:  # noqa: BLE001
        try:
            replies.send(("error", f"{type(e).__name__}: {e}"))
        except OSError:
            pass
    finally:
        if device is not None:
            try:
                device.reset_clocks()
            finally:
                close = getattr(device, "close", None)
                if callable(close):
                    close()


def _child_main(fd_in: int, fd_out: int) -> None:
    """The controller process (:mod:`~zeus_plugins_perseus.runtime.controller_process`)."""
    requests, replies = Connection(fd_in, writable=False), Connection(fd_out, readable=False)
    try:
        path = requests.recv()
        sys.path[:] = path
        make_device, parent = requests.recv()
    except Exception as e:  # noqa: BLE001 - e.g. make_device does not unpickle here
        replies.send(("error", f"cannot receive the device factory: {type(e).__name__}: {e}"))
        return
    _serve(make_device, requests, replies, parent)


class FrequencyController:
    """``set_frequency(mhz)`` locks the SM clock through a device in its own process."""

    def __init__(self, make_device: Callable[[], Any], wait: bool = True, start_timeout_s: float = 60.0) -> None:
        self.wait = wait
        self._closed = False
        child_in, to_child = os.pipe()
        from_child, child_out = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "zeus_plugins_perseus.runtime.controller_process", str(child_in), str(child_out)],
            pass_fds=(child_in, child_out),
            stdin=subprocess.DEVNULL,
        )
        os.close(child_in)
        os.close(child_out)
        self._requests = Connection(to_child, readable=False)
        self._replies = Connection(from_child, writable=False)
        try:
            self._requests.send(list(sys.path))
            self._requests.send((make_device, os.getpid()))
            detail: Any  # the SM clocks once ready, else why not
            status, detail = self._reply(start_timeout_s)
        except (OSError, EOFError) as e:
            status, detail = "error", f"{type(e).__name__}: {e}"
        if status != "ready":
            self._stop(5.0)
            raise ControllerError(f"frequency controller did not start: {detail}")
        #: SM clocks (MHz, highest first) the device supports, or None if it cannot list them: what a
        #: rank registers with the plan server as its ``available_frequencies``
        self.supported_clocks: list[int] | None = detail
        atexit.register(self.close)

    def _reply(self, timeout: float) -> tuple[str, Any]:
        try:
            if self._replies.poll(timeout):
                return self._replies.recv()
        except (EOFError, OSError):
            pass
        alive = self.process.poll() is None
        return "error", f"no answer in {timeout:g} s (controller {'alive' if alive else 'exited'})"

    def set_frequency(self, mhz: int) -> None:
        """Lock the SM clock to ``mhz`` (0 = leave it); waits for the lock unless ``wait=False``."""
        if self._closed:
            raise ControllerError("the frequency controller is closed")
        if not mhz:
            return
        self._requests.send((int(mhz), self.wait))
        if self.wait:
            status, detail = self._reply(30.0)
            if status != "ok":
                raise ControllerError(f"cannot set {mhz} MHz: {detail}")

    def reset(self) -> None:
        """Reset the clocks now (the engine failed mid-step) and keep serving: the next
        ``set_frequency`` locks again. Always waits for the driver."""
        if self._closed:
            return
        self._requests.send((RESET, True))
        status, detail = self._reply(30.0)
        if status != "ok":
            raise ControllerError(f"cannot reset the clocks: {detail}")

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop the controller; it resets the clocks before it exits."""
        if self._closed:
            return
        self._closed = True
        try:
            self._requests.send(None)
        except (OSError, ValueError):
            pass
        self._stop(timeout_s)
        try:
            atexit.unregister(self.close)
        except Exception:  # noqa: BLE001
            pass

    def _stop(self, timeout_s: float) -> None:
        self._closed = True
        for conn in (self._requests, self._replies):
            conn.close()  # the child reads EOF: it resets the clocks and exits
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:  # pragma: no cover - a wedged driver call
            self.process.terminate()
            self.process.wait(5)

    def __enter__(self) -> FrequencyController:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
