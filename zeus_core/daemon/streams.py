"""Power streams (``/gpu/stream_power``, ``/cpu/stream_power``): the devices are polled only while someone listens.

One :class:`PowerFeed` per kind of device. The first subscriber starts its
poller thread; the poller reads the devices its subscribers asked for, every
``interval_s``, and ends when the last subscriber leaves -- so an idle daemon
asks the driver nothing. Each subscriber has a queue of at most ``bound``
samples: a client that does not read its stream fills it, and is then dropped
(``on_drop`` closes its connection) instead of making the poller, or the other
clients, wait for it.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger("zeus.daemon")

#: samples one client may have waiting before it counts as too slow and is dropped
STREAM_BOUND = 64


class Subscriber:
    """One client's stream: the device ids it wants, and its bounded queue of samples."""

    def __init__(self, ids: Iterable[int], bound: int, on_drop: Callable[[], None]) -> None:
        self.ids = frozenset(ids)
        self.queue: queue.Queue[dict[str, Any]] = queue.Queue(bound)
        self.on_drop = on_drop
        self.dropped = False


class PowerFeed:
    """Samples of one kind of device (``read(ids)`` returns ``[(id, sample), ...]``) for its subscribers."""

    def __init__(
        self, name: str, read: Callable[[list[int]], list[tuple[int, dict[str, Any]]]], interval_s: float, bound: int = STREAM_BOUND
    ):
        self.name = name
        self.read = read
        self.interval_s = interval_s
        self.bound = bound
        self.polls = 0  # how many times the devices were read (tests watch it stop)
        self._subs: set[Subscriber] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    @property
    def listening(self) -> int:
        with self._lock:
            return len(self._subs)

    def subscribe(self, ids: Iterable[int], on_drop: Callable[[], None]) -> Subscriber:
        sub = Subscriber(ids, self.bound, on_drop)
        with self._lock:
            self._subs.add(sub)
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name=f"zeus-daemon-{self.name}-feed", daemon=True)
                self._thread.start()
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        with self._lock:
            self._subs.discard(sub)

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                subs = list(self._subs)
                if not subs:
                    self._thread = None  # the next subscriber starts a new poller
                    return
            wanted = sorted(set().union(*(s.ids for s in subs)))
            try:
                samples = self.read(wanted)
            except Exception as e:  # noqa: BLE001 - a driver hiccup must not end every stream
                log.warning("%s power stream: reading %s failed: %s", self.name, wanted, e)
                samples = []
            self.polls += 1
            for sub in subs:
                if sub.dropped:
                    continue
                for device, sample in samples:
                    if device not in sub.ids:
                        continue
                    try:
                        sub.queue.put_nowait(sample)
                    except queue.Full:
                        sub.dropped = True
                        self.unsubscribe(sub)
                        log.warning("%s power stream: a client read none of its last %d samples; dropped it", self.name, self.bound)
                        sub.on_drop()
                        break
            self._stop.wait(self.interval_s)

    def close(self) -> None:
        """Stop polling and drop every subscriber (the daemon is stopping)."""
        self._stop.set()
        with self._lock:
            subs, self._subs = list(self._subs), set()
            thread = self._thread
        for sub in subs:
            sub.on_drop()
        if thread is not None:
            thread.join(5.0)
