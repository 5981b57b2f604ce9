"""Progress within a try: its epochs and each epoch's steps, while ``zeus run`` waits for the recurrence.

A recurrence of real training takes seconds to hours, and ``zeus run`` hears of it only when it
ends; this says what the training is doing meanwhile. On a terminal it is a live line under
``zeus run``'s own (the epoch, a bar over its steps, the last validation metric against the
target), gone when the try ends. Where ``zeus run`` prints full lines (output that is not a
terminal, or ``-v``: the ``zeus`` logger at info) it prints one line per finished epoch instead:
its steps, time, energy and metric. Only rank 0 shows it; the other ranks train the same steps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from zeus_core.units import duration, energy

if TYPE_CHECKING:  # annotations only
    from rich.console import Console

    from zeus_core import Measurement


def full_lines(console: Console) -> bool:
    """Whether progress prints lines rather than a live display: ``zeus run``'s own rule."""
    return not console.is_terminal or logging.getLogger("zeus").isEnabledFor(logging.INFO)


class TryProgress:
    """The progress of one try, shown on ``console`` (see the module)."""

    def __init__(
        self,
        console: Console,
        *,
        recurrence: int,
        try_index: int,
        batch_size: int,
        max_epochs: int,
        target: float | None,
        lines: bool | None = None,
    ) -> None:
        self.console = console
        self.lines = full_lines(console) if lines is None else lines
        self.what = f"recurrence {recurrence}, try {try_index}, batch {batch_size}"
        self.max_epochs = max_epochs
        self.target = target
        self.epoch = 0
        self.steps = 0
        self.metric: float | None = None
        self.metric_this_epoch = False
        self._live: Any = None
        self._task: Any = None
        self.closed = False

    # -- what the loop calls --

    def epochs(self, inner: Iterable[int], measurements: Callable[[], list[Measurement]]) -> Iterator[int]:
        """``inner``'s epochs, each shown as it begins and, once ended, with its measurement."""
        it = iter(inner)
        try:
            for epoch in it:
                self._ended(measurements)
                self._begin(epoch)
                yield epoch
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()  # the epoch left early ends (and is measured) here
            self._ended(measurements)
            self.close()

    def iterate(self, inner: Iterable[Any], count: int) -> Iterator[Any]:
        """``inner``'s items (``count`` of them), each counted as a step once it is done."""
        if self._task is not None:
            self._live.update(self._task, total=count, completed=0)
        for item in inner:
            yield item
            self.steps += 1
            if self._task is not None:
                self._live.advance(self._task)

    def reported(self, metric: float | None) -> None:
        """The epoch's validation metric, as the session judged it (the ranks' mean)."""
        self.metric, self.metric_this_epoch = metric, metric is not None
        if self._task is not None:
            self._live.update(self._task, note=escape(self._metric_text()), refresh=True)

    def close(self) -> None:
        """End the display (the try ended); nothing shows after."""
        self.closed = True
        if self._live is not None:
            live, self._live, self._task = self._live, None, None
            live.stop()

    # -- what it shows --

    def _metric_text(self) -> str:
        if self.metric is None:
            return ""
        target = "" if self.target is None else f" (target {self.target:g})"
        return f"metric {self.metric:.4g}{target}"

    def _begin(self, epoch: int) -> None:
        self.epoch, self.steps, self.metric_this_epoch = epoch, 0, False
        description = escape(f"{self.what}: epoch {epoch} of at most {self.max_epochs}")
        if self.lines or self.closed:
            return
        if self._live is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._live = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("steps"),
                TimeElapsedColumn(),
                TextColumn("{task.fields[note]}"),
                console=self.console,
                transient=True,
            )
            self._live.start()
            self._task = self._live.add_task(description, total=None, note=escape(self._metric_text()))
            self._live.refresh()  # each epoch's line shows as it begins, not at the next tick
        else:
            self._live.update(self._task, description=description, total=None, completed=0, refresh=True)

    def _ended(self, measurements: Callable[[], list[Measurement]]) -> None:
        """The line of the epoch that just ended (once: ``epoch`` is cleared)."""
        if not self.epoch or self.closed:
            return
        epoch, self.epoch = self.epoch, 0
        if not self.lines:
            return
        done = measurements()
        m = done[-1] if len(done) >= epoch else None
        parts = [f"{self.steps} steps"]
        if m is not None:
            parts.append(f"{duration(m.time)}, {energy(m.total_system_energy)}")
        if self.metric_this_epoch:
            parts.append(self._metric_text())
        self.console.print(escape(f"  {self.what}: epoch {epoch}: {', '.join(parts)}"), highlight=False, soft_wrap=True)
