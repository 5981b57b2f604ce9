"""A test-only device for the torch workload: a real clock, energy from a fixed power.

Device ``wall``: named ``gpu0`` (a simulated accelerator), draws
``watts x (1 + rank) x limit / max`` (``rank`` from ``$RANK``, so data-parallel
tests can tell the ranks' energies apart), with power limits in
[min_power_w, max_power_w]. Every limit change and restore is appended to
``log`` (a JSON-lines file; ``{rank}`` in the path is replaced), so tests can
check what each rank was told and that it was put back. Changes are journaled
(:class:`zeus_core.SettingsGuard`), so a killed rank's limit is
restored from the journal like a real device's.

Importable by name in spawned ranks because tests put this folder on
``sys.path`` (which ``spawn`` children inherit).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import attrs

from zeus_core import SettingsGuard, hookimpl
from zeus_core.attribution import DeviceActivity, ProcessActivity


#: What a journaled limit is restored to after a kill (tests read the log).
def _restore(key: str, original) -> None:
    path, rank = key.split("|")
    _log(path, {"rank": int(rank), "event": "journal-restore", "w": original})


def _log(path: str, event: dict) -> None:
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(event) + "\n")


@attrs.define
class WallOptions:
    watts: float = 40.0
    max_power_w: float = 300.0
    min_power_w: float = 100.0
    log: str = ""


class WallDevice:
    def __init__(self, options: WallOptions, context) -> None:
        self.o = options
        self.rank = int(os.environ.get("RANK", "0"))
        self.log = options.log.replace("{rank}", str(self.rank))
        if self.log:
            self.log = str(context.resolve_path(self.log))
        self.names = ["gpu0"]
        self.energy_sources = {"gpu0": "estimate"}
        self.max_power_w = options.max_power_w
        self.limit = options.max_power_w
        self._t = time.monotonic()
        self._e = 0.0
        self.guard = SettingsGuard("torchtest-wall", _restore)

    def clock(self) -> float:
        return time.monotonic()

    def _watts(self) -> float:
        return self.o.watts * (1 + self.rank) * self.limit / self.o.max_power_w

    def read_energy(self) -> dict[str, float]:
        now = time.monotonic()
        self._e += self._watts() * (now - self._t)
        self._t = now
        return {"gpu0": self._e}

    def power_limit_range(self):
        return (self.o.min_power_w, self.o.max_power_w)

    def power_limit(self) -> float:
        return self.limit

    def set_power_limit(self, w: float) -> None:
        if not self.o.min_power_w <= w <= self.o.max_power_w:
            raise ValueError(f"power limit {w} outside [{self.o.min_power_w}, {self.o.max_power_w}]")
        self.read_energy()
        with self.guard.changing(f"{self.log}|{self.rank}", self.o.max_power_w):
            self.limit = float(w)
        _log(self.log, {"rank": self.rank, "event": "set", "w": float(w)})

    def close(self) -> None:
        if self.limit != self.o.max_power_w:
            self.limit = self.o.max_power_w
            _log(self.log, {"rank": self.rank, "event": "restore", "w": self.limit})
        self.guard.forget(f"{self.log}|{self.rank}")


class SharedWallDevice(WallDevice):
    """Device ``wall-shared``: ``wall``, whose GPU each rank shares with a stranger (PID 1), the rank's own
    process at 30 % SM beside it at 10 %: 3/4 of each rank's energy is its own (energy attribution)."""

    def read_process_activity(self, since: float) -> dict[str, DeviceActivity]:
        return {"gpu0": DeviceActivity((ProcessActivity(os.getpid(), sm=30.0), ProcessActivity(1, sm=10.0)))}


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@attrs.define
class AlwaysOptions:
    size: int = 48


class AlwaysBatchSize:
    """Batch-size policy ``always``: ``size``, whatever the workload offers (a policy that ignores the workload)."""

    def __init__(self, options: AlwaysOptions, context) -> None:
        self.size = options.size

    def choose(self, ctx) -> int:
        return self.size

    def observe(self, ctx, record) -> None:
        return None

    def get_state(self):
        return None

    def set_state(self, state) -> None:
        return None


@hookimpl
def zeus_register_devices(register):
    register("wall", WallDevice, options=WallOptions)
    register("wall-shared", SharedWallDevice, options=WallOptions)


@hookimpl
def zeus_register_batch_size_policies(register):
    register("always", AlwaysBatchSize, options=AlwaysOptions)


@hookimpl
def zeus_register_restorers(register):
    register("torchtest-wall", _restore)
