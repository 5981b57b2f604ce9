"""Energy of GPUs without an energy counter (before Volta): polled power, integrated.

A child process (``python -m zeus_plugins_nvml.poller``) reads each GPU's power
every ``interval`` seconds and writes binary samples to its stdout; a reader
thread in the parent integrates them (:class:`zeus_core.devicekit.PowerIntegral`:
the trapezoid rule, the last power held until "now") into a running energy per
GPU. The child imports nothing of zeus, so that it starts fast. A process rather than a thread, as upstream Zeus does, so that
polling never competes with training for the GIL; ``subprocess`` rather than
``multiprocessing`` so that the user's ``__main__`` is never re-imported.

The child never outlives the parent: it waits on its stdin between samples,
and the parent holds the only write end. When the parent closes it, exits or
is SIGKILLed, the child sees end-of-file within one interval and exits
(a broken stdout ends it too). It ignores SIGINT, so Ctrl-C in a terminal
stops the training cleanly rather than the poller noisily.

Samples are not deduplicated (a dropped repeat makes the trapezoid rule
interpolate across a step change, upstream's small bias).
"""

from __future__ import annotations

import argparse
import importlib
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time

RECORD = struct.Struct("<Hdd")  # slot, monotonic time (s), power (W)
READY = 0xFFFF


class PollerError(RuntimeError):
    """The poller process could not start; the message carries its stderr."""


# --------------------------------------------------------------------------- child


def _child(module: str, interval: float, uuids: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    nvml = importlib.import_module(module)
    nvml.nvmlInit()
    handles = [nvml.nvmlDeviceGetHandleByUUID(u) for u in uuids]
    out = os.fdopen(sys.stdout.fileno(), "wb", buffering=0, closefd=False)
    stdin = sys.stdin.fileno()
    get_power = nvml.nvmlDeviceGetPowerUsage
    errors = 0
    first = True
    while True:
        buf = bytearray()
        for slot, h in enumerate(handles):
            try:
                mw = get_power(h)
            except nvml.NVMLError as e:
                if first:  # this GPU cannot be polled at all
                    print(f"cannot read the power of GPU {uuids[slot]}: {e}", file=sys.stderr, flush=True)
                    return 3
                errors += 1  # sporadic NotSupported happens on some boards: skip the sample
                continue
            buf += RECORD.pack(slot, time.monotonic(), mw / 1000.0)
        if first:
            buf += RECORD.pack(READY, time.monotonic(), 0.0)
            first = False
        try:
            out.write(bytes(buf))
        except (BrokenPipeError, OSError):
            return 0
        ready, _, _ = select.select([stdin], [], [], interval)
        if ready and not os.read(stdin, 64):
            return 0  # parent closed our stdin or died


# --------------------------------------------------------------------------- parent


class PowerPoller:
    """Running energy (J) per polled GPU, fed by the child process."""

    def __init__(self, nvml_module: str, uuids: list[str], interval_s: float, start_timeout_s: float = 20.0) -> None:
        from zeus_core.devicekit import PowerIntegral  # the parent's side only: the child stays import-free

        self.uuids = list(uuids)
        self.interval_s = interval_s
        self._energy = PowerIntegral()
        self._ready = threading.Event()
        env = dict(os.environ)
        src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "zeus_plugins_nvml.poller", "--module", nvml_module, "--interval", repr(interval_s), *uuids],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            close_fds=True,
        )
        self._thread = threading.Thread(target=self._read, name="zeus-nvml-power-reader", daemon=True)
        self._thread.start()
        if not self._ready.wait(start_timeout_s):
            err = self._stop_and_stderr()
            raise PollerError(f"the NVML power poller did not start within {start_timeout_s:.0f} s: {err or 'no message'}")

    def _read(self) -> None:
        f = self.proc.stdout
        assert f is not None  # started with stdout=PIPE
        size = RECORD.size
        unpack = RECORD.unpack
        add = self._energy.add
        uuids = self.uuids
        while True:
            chunk = f.read(size)
            if not chunk or len(chunk) < size:
                self._ready.set()  # unblock a waiting constructor; it checks the process
                return
            slot, t, p = unpack(chunk)
            if slot == READY:
                self._ready.set()
                continue
            add(uuids[slot], t, p)

    @property
    def samples(self) -> int:
        """Power samples received so far, over every GPU."""
        return self._energy.samples

    def energy(self, now: float) -> list[float]:
        """Energy (J) per slot from the first sample until ``now`` (a ``time.monotonic`` value); never less
        than an earlier answer."""
        return [self._energy.joules(u, now) for u in self.uuids]

    def power(self) -> list[float]:
        """Latest power (W) per slot (0 before its first sample)."""
        return [self._energy.watts(u) or 0.0 for u in self.uuids]

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def _stop_and_stderr(self) -> str:
        self.stop(close_stderr=False)
        stderr = self.proc.stderr
        assert stderr is not None  # started with stderr=PIPE
        try:
            return stderr.read().decode(errors="replace").strip()[-2000:]
        except (OSError, ValueError):
            return ""
        finally:
            stderr.close()

    def stop(self, timeout_s: float = 5.0, close_stderr: bool = True) -> None:
        """Close the child's stdin (it exits within one interval), reap it, and close its pipes
        (``close_stderr=False`` leaves its message to read)."""
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._thread.join(timeout_s)
        if self.proc.stdout:
            self.proc.stdout.close()
        if close_stderr and self.proc.stderr:
            self.proc.stderr.close()

    def __del__(self) -> None:  # last resort; close() is the way
        try:
            if self.proc.poll() is None:
                self.proc.kill()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="zeus_plugins_nvml.poller", description=__doc__.splitlines()[0])
    ap.add_argument("--module", default="pynvml")
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("uuids", nargs="+")
    args = ap.parse_args(argv)
    try:
        return _child(args.module, args.interval, args.uuids)
    except Exception as e:  # noqa: BLE001 - reported to the parent through stderr
        print(f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
