"""A device with SM clock control whose state lives in a JSON file, like a driver shared by processes.

Used by the runtime tests: the controller runs in its own process, so the test
(and the training worker) read the clock it set from the file.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path


class FakeClockDevice:
    names = ["gpu0"]
    energy_sources = {"gpu0": "estimate"}
    max_power_w = 300.0

    def __init__(self, state_path: str, clocks=(1410, 1200, 1000, 800)) -> None:
        self.path = Path(state_path)
        self.clocks = sorted(clocks, reverse=True)
        if not self.path.exists():
            self._write({"locked": None, "log": []})

    def _read(self) -> dict:
        return json.loads(self.path.read_text())

    def _write(self, state: dict) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(self.path)

    def clock(self) -> float:
        return time.monotonic()

    def read_energy(self) -> dict:
        return {"gpu0": 0.0}

    def supported_clocks(self) -> list[int]:
        return list(self.clocks)

    def lock_clocks(self, mhz: int) -> None:
        if mhz not in self.clocks:
            raise ValueError(f"{mhz} MHz is not a supported SM clock")
        s = self._read()
        s["locked"] = mhz
        s["log"].append(mhz)
        self._write(s)

    def reset_clocks(self) -> None:
        s = self._read()
        s["locked"] = None
        s["log"].append("reset")
        self._write(s)

    def close(self) -> None:
        pass


def locked(state_path: str):
    return json.loads(Path(state_path).read_text())["locked"]


def log(state_path: str):
    return json.loads(Path(state_path).read_text())["log"]


def two_stage_rows():
    """A small 2-stage profile with real tradeoffs: stage 1 is lighter, so it can run slower."""
    return stage_rows((1.0, 0.6))


def stage_rows(scales=(1.0, 0.6, 0.8, 0.5)):
    """A profile of ``len(scales)`` stages on clocks 1410..800 MHz; lighter stages (smaller scale) can run slower."""
    rows = []
    for s, scale in enumerate(scales):
        for f, slow, e in ((1410, 1.0, 1.0), (1200, 1.12, 0.9), (1000, 1.3, 0.85), (800, 1.6, 0.83)):
            rows += [(s, "forward", f, 0.02 * scale * slow, 5 * scale * e), (s, "backward", f, 0.04 * scale * slow, 10 * scale * e)]
    return rows


class VirtualGPU:
    """A GPU on a virtual clock whose instruction time and energy depend on the locked SM clock.

    ``run(instruction)`` advances the clock by ``work * (0.3 + 0.7 * fmax / f)``
    seconds (a memory-bound part does not speed up) at ``60 + 240 (f / fmax)^2.5``
    watts, so energy per instruction falls with the clock, then rises again at
    the lowest clocks, as on real GPUs. The first instruction after a clock
    change is 50% slower (the transient a warm-up step absorbs).
    """

    names = ["gpu0"]
    energy_sources = {"gpu0": "counter"}
    max_power_w = 300.0
    WORK = {"forward": 0.02, "backward": 0.04}

    def __init__(self, clocks=(1410, 1200, 1000, 800)) -> None:
        self.clocks = sorted(clocks, reverse=True)
        self.t = 0.0
        self.e = 0.0
        self.locked = None
        self.log = []
        self._cold = False

    def clock(self) -> float:
        return self.t

    def read_energy(self) -> dict:
        return {"gpu0": self.e}

    def supported_clocks(self) -> list:
        return list(self.clocks)

    def lock_clocks(self, mhz: int) -> None:
        if mhz not in self.clocks:
            raise ValueError(f"{mhz} MHz is not a supported SM clock")
        self.locked = mhz
        self.log.append(mhz)
        self._cold = True

    def reset_clocks(self) -> None:
        self.locked = None
        self.log.append("reset")

    @classmethod
    def expected(cls, instruction: str, mhz: int, fmax: int = 1410) -> tuple:
        r = mhz / fmax
        t = cls.WORK[instruction] * (0.3 + 0.7 / r)
        return t, (60 + 240 * r**2.5) * t

    def run(self, instruction: str) -> None:
        t, e = self.expected(instruction, self.locked or self.clocks[0], self.clocks[0])
        if self._cold:
            t, e, self._cold = 1.5 * t, 1.5 * e, False
        self.t += t
        self.e += e

    def close(self) -> None:
        pass


def stage_step(hooks, device, order):
    """One training step of a stage whose instructions run on ``device`` in ``order`` [(name, microbatch)]."""

    def step():
        hooks.on_step_begin()
        for inst, _ in order:
            hooks.on_instruction_begin(inst)
            device.run(inst)
            hooks.on_instruction_end(inst)
        hooks.on_step_end()

    return step


class ConstantPowerDevice:
    """A device drawing ``watts`` all the time, on the real clock (picklable for spawned processes)."""

    names = ["gpu0"]
    energy_sources = {"gpu0": "counter"}
    max_power_w = 300.0

    def __init__(self, watts: float) -> None:
        self.watts = watts
        self.t0 = time.monotonic()

    def clock(self) -> float:
        return time.monotonic()

    def read_energy(self) -> dict:
        return {"gpu0": self.watts * (time.monotonic() - self.t0)}

    def close(self) -> None:
        pass


def nvml_device(driver_path: str, gpus=None):
    """The real ``nvml`` device plugin on the simulated driver at ``driver_path`` (module level, so the
    frequency controller's spawned process can build it): the code that runs on a real GPU."""
    from zeus_plugins_nvml import fake_pynvml

    fake_pynvml.install(driver_path)
    from zeus_plugins_nvml.device import NvmlGpus
    from zeus_plugins_nvml.options import NvmlOptions

    return NvmlGpus(NvmlOptions(gpus=list(gpus)) if gpus is not None else None)


def amd_device(driver_path: str):
    """The real ``amdsmi`` device plugin on the simulated AMD driver at ``driver_path`` (module level, for
    the frequency controller's spawned process)."""
    from zeus_plugins_amdsmi import fake_amdsmi

    fake_amdsmi.install(driver_path)
    from zeus_plugins_amdsmi.device import AmdGpus
    from zeus_plugins_amdsmi.options import AmdsmiOptions

    return AmdGpus(AmdsmiOptions(counter_check_s=0.02))


def nvml_clocks(driver_path: str, index: int = 0):
    """(locked SM clock, locked memory clock) of simulated GPU ``index``; None where not locked."""
    from zeus_plugins_nvml import fake_pynvml

    g = fake_pynvml.read_state(driver_path)["gpus"][index]
    sm, mem = g["locked_clocks"], g["locked_mem_clocks"]
    return (sm[1] if sm else None), (mem[1] if mem else None)


def free_port() -> int:
    """A TCP port free on loopback now (for a plan server a test starts)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def journal_keys() -> list[str]:
    """Keys of the settings journal (the test's own state folder): what the next zeus start would restore."""
    from zeus_core.journal import Journal, journal_path

    with Journal(journal_path()) as j:
        return [e.key for e in j.entries()]


def _wait_for(path: str) -> None:
    """Block until ``path`` exists (what unpickling a :class:`UnpicklesSlowly` does)."""
    while not os.path.exists(path):
        time.sleep(0.01)


class UnpicklesSlowly:
    """A worker's ``at_start`` whose unpickling in the worker waits until ``path`` exists (and leaves None): a
    stand-in for one whose module takes long to import."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (_wait_for, (self.path,))


def imported(name: str) -> bool:
    """Whether module ``name`` is imported in this process (a worker's call, to see what ``at_start`` did)."""
    import sys

    return name in sys.modules


def _fail_to_import(name: str) -> None:
    raise ImportError(f"No module named {name!r}")


class FailsToUnpickle:
    """A call whose unpickling in a worker raises ImportError (a stand-in for a module missing there)."""

    def __reduce__(self):
        return (_fail_to_import, ("zeus_missing_module",))

    def __call__(self) -> None:  # pragma: no cover - never unpickled into a callable
        pass
