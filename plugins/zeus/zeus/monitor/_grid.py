"""What the carbon and price monitors share: their window loop, and how a provider becomes a grid signal.

Upstream's monitors take a provider (an Electricity Maps or OpenEI client) and charge each
hour's energy at that hour's value. Here a provider is adapted into a
:class:`zeus_core.grid.GridSignal` (hourly steps; an hour the provider does not know holds
the nearest known value, as every grid source of zeus does), and each window's energy is
charged against the signal with :class:`zeus_core.grid.GridMeter`: the integration rule of
``zeus run``'s reports. A ``[grid]`` value (a number, a CSV file, ``"electricitymaps:DE"``)
is opened through the core's registry of grid sources instead of a provider.

The loop (:func:`poll_windows`) keeps upstream's protocol: the monitor sends ``(Op, key)``
commands on a queue; at every hour the loop reads the energy of each open window, and at a
window's end it answers ``(gpu, cpu, dram)`` amounts on the other queue. It runs in a thread
of the training process (upstream spawns a process); an error in it is answered on the queue
so that ``end_window`` raises it instead of waiting forever.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from zeus_core.grid import CARBON, JOULES_PER_KWH, Grid, GridMeter, GridSignal, Step, show_time

logger = logging.getLogger(__name__)

#: The kinds of device a measurement has energy for, in the order the answers list them.
KINDS = ("gpu", "cpu", "dram")


class Op(Enum):
    """A command to the window loop (``NEXTITER``: move on to the next hour now; for tests, as upstream)."""

    BEGIN = 0
    END = 1
    NEXTITER = 2


class WorkerFailed(Exception):
    """What the window loop answers when it failed (re-raised by ``end_window``)."""


class HourlySignal:
    """A grid signal of hourly values (Unix hour start -> value), filled by ``fetch()``.

    ``steps`` is a step function of ``period`` seconds; a period with no value holds the
    nearest known one before it (the first known one before all of them) and says so
    (``Step.held``), warned once; with nothing known the value is NaN (nothing is charged).
    """

    def __init__(self, source: str, fetch: Callable[[], dict[float, float]], period_s: float) -> None:
        self.source = source
        self._fetch = fetch
        self.period_s = float(period_s)
        self.known: dict[float, float] = {}
        self._warned = False

    def refresh(self) -> None:
        """Ask the provider again; a failure is logged and the known values hold."""
        try:
            self.known.update(self._fetch())
        except Exception as e:  # noqa: BLE001 - a training job never stops on a grid signal
            logger.warning("%s: could not fetch values (%s); the last known values hold", self.source, e)

    def value_at(self, t: float) -> tuple[float, bool]:
        start = math.floor(t / self.period_s) * self.period_s
        if start in self.known:
            return self.known[start], False
        if not self.known:
            return math.nan, True
        before = [h for h in self.known if h <= start]
        nearest = max(before) if before else min(self.known)
        if not self._warned:
            self._warned = True
            logger.warning("%s: no value for %s; charging the one of %s (held)", self.source, show_time(start), show_time(nearest))
        return self.known[nearest], True

    def steps(self, start: float, end: float) -> list[Step]:
        end = max(start, end)
        out = []
        t = start
        while True:
            stop = min(end, (math.floor(t / self.period_s) + 1) * self.period_s)
            value, held = self.value_at(t)
            out.append(Step(t, stop, value, held))
            if stop >= end:
                return out
            t = stop


def open_grid_value(value: Any, quantity: str, currency: str = "") -> GridSignal:
    """A ``[grid]`` value (a number, a CSV path, ``"electricitymaps:DE"``) opened by the installed grid
    sources (the core's registry); raises ``zeus_core.errors.BadInput`` naming the value's problem."""
    from pathlib import Path

    from zeus_core.engine import get_registry, open_grid
    from zeus_core.errors import BadInput
    from zeus_core.job import GridOptions

    try:
        given: dict[str, Any] = {quantity: value}
        extra: dict[str, Any] = {"currency": currency} if currency else {}
        options = GridOptions(**given, **extra)
    except (TypeError, ValueError) as e:
        raise BadInput(f"{quantity} {value!r}: {e}") from None
    grid = open_grid(options, get_registry(), Path.cwd())
    return grid.signals[quantity]


def hour_floor(now: datetime) -> datetime:
    return now.replace(minute=0, second=0, microsecond=0)


class Ledger:
    """The energy of each open window by period and device, and what it was charged against ``signal``.

    ``record`` adds a reading's joules to its period; ``charge`` charges every recorded period
    (one :class:`~zeus_core.grid.GridMeter` per window and device, so each device pays the
    energy-weighted value of its own hours); ``close`` answers a window's amounts.
    """

    def __init__(self, signal: GridSignal, quantity: str, period: timedelta, currency: str = "") -> None:
        self.signal = signal
        self.quantity = quantity
        self.period_s = period.total_seconds()
        self.currency = currency
        #: key -> period start (Unix s) -> (kind, index) -> joules not yet charged
        self.pending: dict[str, dict[float, dict[tuple[str, int], float]]] = defaultdict(lambda: defaultdict(dict))
        #: key -> (kind, index) -> (meter, joules charged)
        self.meters: dict[str, dict[tuple[str, int], tuple[GridMeter, float]]] = defaultdict(dict)

    def record(self, key: str, period_start: datetime, measurement: Any) -> None:
        slot = self.pending[key][period_start.timestamp()]
        for kind in KINDS:
            for index, joules in (getattr(measurement, f"{kind}_energy", None) or {}).items():
                slot[(kind, int(index))] = slot.get((kind, int(index)), 0.0) + float(joules)

    def charge(self, key: str) -> None:
        if self.quantity == CARBON:
            grid = Grid(carbon=self.signal, currency=self.currency)
        else:
            grid = Grid(price=self.signal, currency=self.currency)
        for start, devices in sorted(self.pending.pop(key, {}).items()):
            for device, joules in devices.items():
                meter, total = self.meters[key].get(device) or (GridMeter(grid), 0.0)
                meter.add(start, start + self.period_s, joules)
                self.meters[key][device] = (meter, total + joules)

    def close(self, key: str) -> tuple[dict[int, float], dict[int, float], dict[int, float]]:
        """The window's amounts per GPU, CPU and DRAM (NaN where the signal never had a value)."""
        self.charge(key)
        out: dict[str, dict[int, float]] = {kind: {} for kind in KINDS}
        for (kind, index), (meter, joules) in sorted(self.meters.pop(key, {}).items()):
            mean = meter.means().get(self.quantity, math.nan)
            out[kind][index] = joules * mean / JOULES_PER_KWH
        return out["gpu"], out["cpu"], out["dram"]


def poll_windows(
    command_q: Any,
    finished_q: Any,
    monitor: Any,
    ledger: Ledger,
    clock: Callable[[], datetime],
    period: timedelta,
    refresh: Callable[[], None] | None = None,
    refresh_every: int = 0,
) -> None:
    """The window loop (see the module). ``clock()`` is the time now (UTC); ``refresh`` asks the provider
    again at every window's end and every ``refresh_every`` periods (0: never on its own)."""
    keys: set[str] = set()
    periods = 0
    try:
        while True:
            now = clock()
            start = hour_floor(now)
            next_start = start + period
            for key in keys:
                monitor.begin_window(key, sync_execution=False)
            try:
                while now < next_start:
                    op, key = command_q.get(timeout=max((next_start - now).total_seconds(), 0.0))
                    if op == Op.BEGIN:
                        monitor.begin_window(key, sync_execution=False)
                        keys.add(key)
                    elif op == Op.END:
                        ledger.record(key, start, monitor.end_window(key, sync_execution=False))
                        if refresh is not None:
                            refresh()
                        finished_q.put(ledger.close(key))
                        keys.discard(key)
                        if not keys:
                            return
                    elif op == Op.NEXTITER:
                        break
                    now = clock()
            except queue.Empty:
                pass
            for key in keys:
                ledger.record(key, start, monitor.end_window(key, sync_execution=False))
            periods += 1
            if refresh_every and periods % refresh_every == 0:
                if refresh is not None:
                    refresh()
                for key in keys:
                    ledger.charge(key)
    except Exception as e:  # noqa: BLE001 - answered to end_window, never lost in the thread
        logger.exception("the monitor's window loop failed")
        finished_q.put(WorkerFailed(f"{type(e).__name__}: {e}"))
    finally:
        monitor.close()  # its power sampler, if it has one


class ChargedWindows:
    """Upstream's monitor shape: named windows of a ``ZeusMonitor``, with the window loop in a thread
    charging them. Subclasses say what the loop is started with (``_loop_args``) and build the answer."""

    def __init__(self, zeus_monitor: Any) -> None:
        self.zeus_monitor = zeus_monitor
        self.current_keys: set[str] = set()
        self.command_q: queue.Queue = queue.Queue()
        self.finished_q: queue.Queue = queue.Queue()
        self.polling_process: threading.Thread | None = None

    def _loop(self) -> Callable[..., None]:
        raise NotImplementedError

    def _loop_args(self) -> tuple:
        raise NotImplementedError

    def begin_window(self, key: str, sync_execution: bool = True) -> None:
        """Begin window ``key``; one of that name already open is a ``ValueError``."""
        if key in self.current_keys:
            raise ValueError(f"Measurement window '{key}' already exists")
        self.zeus_monitor.begin_window(key, sync_execution=sync_execution)
        self.current_keys.add(key)
        if len(self.current_keys) == 1:  # the loop ends when its last window does: a new one, on new queues
            self.command_q = queue.Queue()
            self.finished_q = queue.Queue()
            self.polling_process = threading.Thread(
                target=self._loop(), name="zeus-grid-windows", daemon=True, args=(self.command_q, self.finished_q, *self._loop_args())
            )
            self.polling_process.start()
        self.command_q.put((Op.BEGIN, key))

    def _end(self, key: str, sync_execution: bool) -> tuple[Any, tuple[dict[int, float], ...]]:
        """The window's measurement and the loop's amounts (gpu, cpu, dram)."""
        if key not in self.current_keys:
            raise ValueError(f"Measurement window '{key}' does not exist")
        self.command_q.put((Op.END, key))
        while True:
            try:
                answer = self.finished_q.get(timeout=1.0)
                break
            except queue.Empty:
                if self.polling_process is None or not self.polling_process.is_alive():
                    answer = WorkerFailed("the window loop stopped")
                    break
        self.current_keys.discard(key)
        measurement = self.zeus_monitor.end_window(key, sync_execution=sync_execution)
        if isinstance(answer, WorkerFailed):
            raise RuntimeError(f"measurement window '{key}': {answer}")
        return measurement, answer
