"""Result records: one per try, and the job summary.

These are the rows of ``recurrences.csv`` and the body of ``summary.json``;
their column and key names are a contract with scripts outside the project.
"""

from __future__ import annotations

from typing import Any

import attrs

#: Columns of ``recurrences.csv``, in order (contract: extend, never rename).
TRY_COLUMNS = ("recurrence", "try", "batch_size", "power_limit", "epochs", "time_s", "energy_j", "cost", "reached")


@attrs.define
class TryRecord:
    """One try: a training run at one batch size, to the target or until stopped.

    ``recurrence`` and ``try_index`` count from 1. ``power_limit`` is the limit the
    run held after any profiling (None when the device has no power control).
    ``stopped`` says why a run that did not reach the target ended:
    ``early-stop`` (cost bound), ``max-epochs``, or ``never-ran`` (the bound
    allowed no epoch at all). ``extra`` holds the workload's own details
    (JSON-able). ``steady_cost`` is what the try would have cost had its
    power-profiling epochs run at the limit the power policy settled on (None
    when no epoch profiled): the cost later tries at this batch size will have,
    which is what a batch-size policy learns from
    (:func:`zeus_core.stopping.steady_state_cost`).
    """

    recurrence: int
    try_index: int
    batch_size: int
    power_limit: float | None
    epochs: int
    time_s: float
    energy_j: float
    cost: float
    reached: bool
    stopped: str | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)
    steady_cost: float | None = None

    def row(self) -> dict[str, Any]:
        """The ``recurrences.csv`` row of this try."""
        return {
            "recurrence": self.recurrence,
            "try": self.try_index,
            "batch_size": self.batch_size,
            "power_limit": "" if self.power_limit is None else self.power_limit,
            "epochs": self.epochs,
            "time_s": self.time_s,
            "energy_j": self.energy_j,
            "cost": self.cost,
            "reached": self.reached,
        }


@attrs.define
class JobSummary:
    """Totals over every try of the job (this run and earlier ones in the store).

    ``recurrences`` counts the recurrences with a try; for a job that trains, ``begun`` is
    how many recurrence numbers were taken, ``abandoned`` lists those that ended without a
    try that reached the target (``{"recurrence", "reason"}``) and ``open`` those not ended
    (running now, or whose runner was lost where no runner of this job has looked since).
    """

    job: str
    recurrences: int
    tries: int
    energy_j: float
    time_s: float
    cost: float
    knobs: dict[str, Any]
    records: list[TryRecord] = attrs.field(factory=list, repr=False)
    extra: dict[str, Any] = attrs.field(factory=dict)
    begun: int | None = None
    abandoned: list[dict[str, Any]] = attrs.field(factory=list)
    open: list[int] = attrs.field(factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "job": self.job,
            "recurrences": self.recurrences,
            "tries": self.tries,
            "energy_j": self.energy_j,
            "time_s": self.time_s,
            "cost": self.cost,
            "knobs": self.knobs,
        }
        if self.begun is not None:
            out.update(begun=self.begun, abandoned=self.abandoned, open=self.open)
        out.update(self.extra)
        return out
