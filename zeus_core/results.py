"""Result records: one per try, and the job summary.

These are the rows of ``recurrences.csv`` and the body of ``summary.json``;
their column and key names are a contract with scripts outside the project.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import attrs

from zeus_core.measurement import energy_method
from zeus_core.scheduler import ordered

#: Columns of ``recurrences.csv``, in order (contract: extend, never rename). A job with ``[grid]``
#: adds the columns of :attr:`TryRecord.grid` after these (:func:`try_columns`). ``power_limit_w``
#: repeats ``power_limit`` under a name that says its unit (watts), as ``time_s`` and ``energy_j`` do.
TRY_COLUMNS = ("recurrence", "try", "batch_size", "power_limit", "epochs", "time_s", "energy_j", "cost", "reached", "power_limit_w")

#: The columns that follow every other (the scheduler's included) in ``recurrences.csv``, and the keys
#: that follow every other in ``summary.json``: how the energy was measured (``counter``, ``polling``,
#: ``estimate``, or ``mixed:`` and the methods joined by ``+``: :func:`zeus_core.measurement.energy_method`)
#: and a +/- bound in joules on ``energy_j`` (empty in the CSV, null in JSON, where unknown).
ENERGY_COLUMNS = ("energy_method", "energy_error_j")
#: The key of ``TryRecord.extra`` under which the core keeps a try's ``method`` and ``error_j`` (None: unknown).
ENERGY_KEY = "energy_accuracy"
#: The key of ``TryRecord.extra`` under which the core keeps a try's grid columns.
GRID_KEY = "grid"
#: The key of ``TryRecord.extra`` under which the core keeps the scheduler's context of a try
#: (:func:`zeus_core.scheduler.context`: Slurm job, Kubernetes pod, torchrun rank).
SCHEDULER_KEY = "scheduler"
#: The columns that follow :data:`ENERGY_COLUMNS` in ``recurrences.csv`` (and keys in ``summary.json``)
#: where a try's own process was seen on its GPUs: the energy charged to it by energy attribution (an
#: estimate: :mod:`zeus_core.attribution`; it ran beside other processes) and how the shares were made
#: (``sm``, ``equal``, ``whole-gpu``, joined by ``+``). Absent where no try's process was seen (a
#: driver that lists no process: the file is as before).
ATTRIBUTION_COLUMNS = ("energy_attributed_j", "energy_attribution")
#: The key of ``TryRecord.extra`` under which the core keeps a try's ``energy_j`` and ``basis`` charged by attribution.
ATTRIBUTION_KEY = "attribution"


def try_columns(records: list[TryRecord]) -> list[str]:
    """The columns of ``recurrences.csv`` for ``records``: :data:`TRY_COLUMNS`, then the grid
    columns any of them has (``carbon_g``, ``carbon_intensity_g_per_kwh``, ``cost_eur``, ...), then
    the scheduler's columns any of them has (``slurm_job_id``, ``k8s_pod``, ...; none outside a
    scheduler, so that a job's file is the same wherever it ran without one)."""
    extra: dict[str, None] = {}
    context: set[str] = set()
    for r in records:
        extra.update(dict.fromkeys(r.grid))
        context.update(r.scheduler)
    attributed = [*ATTRIBUTION_COLUMNS] if any(r.attributed is not None for r in records) else []
    return [*TRY_COLUMNS, *extra, *ordered(context), *ENERGY_COLUMNS, *attributed]


@attrs.define
class TryRecord:
    """One try: a training run at one batch size, to the target or until stopped.

    ``recurrence`` and ``try_index`` count from 1. ``power_limit`` is the limit the
    run held after any profiling (None when the device has no power control).
    ``stopped`` says why a run that did not reach the target ended:
    ``early-stop`` (cost bound), ``max-epochs``, or ``never-ran`` (the bound
    allowed no epoch at all). ``extra`` holds the workload's own details
    (JSON-able), and under ``extra["grid"]`` the try's emissions and energy cost when the job
    has ``[grid]`` (:attr:`grid`, set by the core). ``steady_cost`` is what the try would have cost had its
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

    @property
    def grid(self) -> dict[str, float]:
        """The try's grid columns (``carbon_g``, ``carbon_intensity_g_per_kwh``, ``cost_<currency>``,
        ``price_<currency>_per_kwh``; :mod:`zeus_core.grid`), empty when the job has no ``[grid]``."""
        got = self.extra.get(GRID_KEY)
        return dict(got) if isinstance(got, dict) else {}

    @property
    def scheduler(self) -> dict[str, str]:
        """The scheduler's context of the try (:func:`zeus_core.scheduler.context`: ``slurm_job_id``,
        ``k8s_pod``, ``torch_rank``, ...), empty when it ran under none."""
        got = self.extra.get(SCHEDULER_KEY)
        return {str(k): str(v) for k, v in got.items()} if isinstance(got, dict) else {}

    @property
    def energy_method(self) -> str:
        """How the try's energy was measured (:data:`ENERGY_COLUMNS`); "" where it was not recorded."""
        got = self.extra.get(ENERGY_KEY)
        return str(got.get("method") or "") if isinstance(got, dict) else ""

    @property
    def energy_error_j(self) -> float | None:
        """The +/- bound (J) on :attr:`energy_j`; None where it is unknown."""
        got = self.extra.get(ENERGY_KEY)
        value = got.get("error_j") if isinstance(got, dict) else None
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    @property
    def attributed(self) -> dict[str, Any] | None:
        """The energy charged to the try's own process by attribution (``energy_j``, ``basis``:
        :data:`ATTRIBUTION_COLUMNS`); None where its process was not seen on its GPUs."""
        got = self.extra.get(ATTRIBUTION_KEY)
        return dict(got) if isinstance(got, dict) and isinstance(got.get("energy_j"), (int, float)) else None

    def row(self) -> dict[str, Any]:
        """The ``recurrences.csv`` row of this try (its grid columns after the others, then its scheduler's,
        then how its energy was measured and its bound)."""
        limit = "" if self.power_limit is None else self.power_limit
        return {
            "recurrence": self.recurrence,
            "try": self.try_index,
            "batch_size": self.batch_size,
            "power_limit": limit,
            "epochs": self.epochs,
            "time_s": self.time_s,
            "energy_j": self.energy_j,
            "cost": self.cost,
            "reached": self.reached,
            "power_limit_w": limit,
            **self.grid,
            **self.scheduler,
            "energy_method": self.energy_method,
            "energy_error_j": "" if self.energy_error_j is None else self.energy_error_j,
        } | self._attributed_cells()

    def _attributed_cells(self) -> dict[str, Any]:
        got = self.attributed
        return {} if got is None else {"energy_attributed_j": got["energy_j"], "energy_attribution": got.get("basis", "")}


@attrs.define
class ThisRun:
    """The part of a job's summary that one ``zeus run`` ran: the recurrence numbers it began (the
    abandoned ones included) and the tries they hold."""

    recurrences: list[int]
    tries: int

    def to_json(self) -> dict[str, Any]:
        return {
            "recurrences": len(self.recurrences),
            "first_recurrence": min(self.recurrences, default=None),
            "last_recurrence": max(self.recurrences, default=None),
            "tries": self.tries,
        }

    def describe(self) -> str:
        """``recurrences 141-280``, in words (with the count where numbers in between belong to other runners)."""
        if not self.recurrences:
            return "no recurrence"
        lo, hi, n = min(self.recurrences), max(self.recurrences), len(self.recurrences)
        if n == 1:
            return f"recurrence {lo}"
        return f"recurrences {lo}-{hi}" + ("" if hi - lo + 1 == n else f" ({n} of them)")


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


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
    #: The job's grid columns over its tries (``carbon_g``, ``cost_eur``, ...: :func:`zeus_core.grid.job_totals`),
    #: written next to ``energy_j``; empty without ``[grid]``.
    grid: dict[str, float] = attrs.field(factory=dict)
    begun: int | None = None
    abandoned: list[dict[str, Any]] = attrs.field(factory=list)
    open: list[int] = attrs.field(factory=list)
    #: what this command ran of the job (None: it ran nothing, as ``zeus report``); the rest of the
    #: summary is the job so far, this run's recurrences included
    this_run: ThisRun | None = None
    #: Unix time the job's history began (its first recurrence; None where the store does not say)
    first_began: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "job": self.job,
            "recurrences": self.recurrences,
            "tries": self.tries,
            "energy_j": self.energy_j,
            **self.grid,
            "time_s": self.time_s,
            "cost": self.cost,
            "knobs": self.knobs,
        }
        if self.begun is not None:
            out.update(begun=self.begun, abandoned=self.abandoned, open=self.open)
        # which recurrences the outputs cover (all the job's, 1 .. last), and which of them this run ran
        numbers = {r.recurrence for r in self.records}
        out["covers"] = {
            "first_recurrence": min(numbers, default=None),
            "last_recurrence": max(numbers, default=None),
            "since": _iso(self.first_began),
        }
        out["this_run"] = None if self.this_run is None else self.this_run.to_json()
        # the schedulers' contexts the tries ran in (each distinct one once, in order), absent outside any
        contexts: list[dict[str, str]] = []
        for r in self.records:
            if r.scheduler and r.scheduler not in contexts:
                contexts.append(r.scheduler)
        if contexts:
            out["scheduler"] = contexts
        out.update(self.extra)
        out["energy_method"], out["energy_error_j"] = self.energy_accuracy()
        charged = [r.attributed for r in self.records if r.attributed is not None]
        if charged:  # an estimate: the tries' own processes' share of GPUs they shared (ATTRIBUTION_COLUMNS)
            out["energy_attributed_j"] = float(sum(c["energy_j"] for c in charged))
            out["energy_attribution"] = "+".join(sorted({b for c in charged for b in str(c.get("basis", "")).split("+") if b}))
        return out

    def energy_accuracy(self) -> tuple[str, float | None]:
        """How the job's energy was measured, over its tries, and the +/- bound (J) on ``energy_j``:
        the sum of the tries' bounds (None where a try's is unknown, or without tries)."""
        errors = [r.energy_error_j for r in self.records]
        known = [e for e in errors if e is not None]
        total = float(sum(known)) if known and len(known) == len(errors) else None
        return energy_method(r.energy_method for r in self.records), total


__all__ = [
    "TryRecord",
    "JobSummary",
    "ThisRun",
    "TRY_COLUMNS",
    "ENERGY_COLUMNS",
    "ENERGY_KEY",
    "try_columns",
    "GRID_KEY",
    "SCHEDULER_KEY",
    "ATTRIBUTION_COLUMNS",
    "ATTRIBUTION_KEY",
]
