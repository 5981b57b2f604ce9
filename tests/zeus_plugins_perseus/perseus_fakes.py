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
    rows = []
    for s, scale in ((0, 1.0), (1, 0.6)):
        for f, slow, e in ((1410, 1.0, 1.0), (1200, 1.12, 0.9), (1000, 1.3, 0.85), (800, 1.6, 0.83)):
            rows += [(s, "forward", f, 0.02 * scale * slow, 5 * scale * e), (s, "backward", f, 0.04 * scale * slow, 10 * scale * e)]
    return rows
