"""``job.toml`` as the parts see it: the core's ``[job]`` table (:class:`JobOptions`), and a
validated job (:class:`JobSpec`): the ``[job]`` options and each part section's plugin and options.

Reading and validating a job file is the engine's (:mod:`zeus_core.engine.validation`).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from zeus_core.cost import check_eta
from zeus_core.hookspecs import PART_KINDS
from zeus_core.identity import NOT_IDENTITY, option_identity
from zeus_core.unset import unset
from zeus_core.validators import at_least, between, finite, nonnegative, positive

if TYPE_CHECKING:  # annotations only
    from zeus_core.registrations import Registration

#: The longest job name: it names a file (``.zeus/<name>.sqlite``).
MAX_NAME = 100
#: Bounds of the ``[job]`` counts (far beyond any real job; recurrence and try numbers stay
#: within what every store and the service's API hold, 2**31 - 1).
MAX_RECURRENCES = 1_000_000
MAX_EPOCHS = 1_000_000
MAX_TRIES = 10_000
MAX_PROCESSES = 1024
MAX_SEED = 2**63 - 1


def job_name(_inst: Any, _attribute: Any, value: str) -> None:
    """A job name is a name, not a path: it becomes ``.zeus/<name>.sqlite``."""
    if value == "":  # the job file's stem is used
        return
    bad = next((c for c in value if c in "/\\\0" or not c.isprintable()), None)
    if bad is not None or value in (".", "..") or value.strip() != value or len(value) > MAX_NAME:
        why = (
            f"contains {bad!r}"
            if bad is not None
            else f"is longer than {MAX_NAME} characters"
            if len(value) > MAX_NAME
            else "has leading or trailing spaces"
            if value.strip() != value
            else "is not a name"
        )
        raise ValueError(
            f"name {value[:40]!r}{'...' if len(value) > 40 else ''} {why}: a job name names the store file "
            f"(.zeus/<name>.sqlite), so it must be a plain name of letters, digits, '-', '_' or '.' "
            "(use job.store to put the store elsewhere)"
        )


@attrs.define
class JobOptions:
    """The core's ``[job]`` table.

    A recurrence is one training run to the target metric (with retries when a
    try stops early or hits ``max_epochs``); ``zeus run`` runs ``recurrences``
    of them, continuing the numbering of earlier runs of the same job.
    """

    name: str = attrs.field(default="", validator=job_name, metadata=NOT_IDENTITY)
    recurrences: int = attrs.field(default=1, validator=between(0, MAX_RECURRENCES), metadata=NOT_IDENTITY)
    seed: int = attrs.field(
        default=0, validator=between(0, MAX_SEED, hint="random generators take a seed >= 0 of at most 64 bits"), metadata=NOT_IDENTITY
    )
    eta_knob: float = attrs.field(default=0.5, validator=lambda _i, _a, v: check_eta(v))
    beta_knob: float = attrs.field(default=2.0, validator=at_least(1, hint="inf disables early stopping"))
    target_metric: float | None = attrs.field(default=None, validator=attrs.validators.optional(finite))
    higher_is_better: bool = True
    max_epochs: int = attrs.field(default=100, validator=between(1, MAX_EPOCHS))
    max_tries: int = attrs.field(default=20, validator=between(1, MAX_TRIES), metadata=NOT_IDENTITY)
    store: str = attrs.field(default="", metadata=unset(".zeus/<job name>.sqlite under the current folder", metadata=NOT_IDENTITY))
    processes: int = attrs.field(default=1, validator=between(1, MAX_PROCESSES, hint="one process per device"))


#: The plausible largest magnitude of each ``[grid]`` quantity, with its unit, wherever it comes from
#: (a number in ``[grid]``, a CSV row, a live answer): the dirtiest grids are about 1,000 gCO2eq/kWh,
#: and the dearest prices a few units of any currency per kWh (a few thousand in currencies of small
#: units). A value past it is refused, naming the bound, before any arithmetic on it (energy x value,
#: summed over a job) could overflow to a value no report can hold.
GRID_BOUNDS: dict[str, tuple[float, str]] = {
    "carbon_intensity": (10_000.0, "gCO2eq/kWh"),
    "price": (1_000_000.0, "per kWh"),
}
#: The longest ``[grid] timeout_s`` (a live source's wait for its service), in seconds.
MAX_GRID_TIMEOUT_S = 3600.0


def grid_bound_problem(quantity: str, value: float) -> str | None:
    """What is wrong with ``value`` of ``quantity`` (``carbon_intensity`` or ``price``) past its
    :data:`GRID_BOUNDS`, or None."""
    high, unit = GRID_BOUNDS.get(quantity, (math.inf, ""))
    if abs(value) > high:
        return (
            f"{value:g} {unit} is beyond {high:,.0f} {unit}, the most a {quantity.replace('_', ' ')} can plausibly "
            "be; is the unit right (per kWh, not per MWh), or the value a typo?"
        )
    return None


def _grid_value(_inst: Any, attribute: Any, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(
            f'{attribute.name} must be a number, the path of a CSV file or a source such as "electricitymaps:DE", got {value!r}'
        )
    if isinstance(value, str) and not value.strip():
        raise ValueError(f"{attribute.name} must not be empty (leave the key out for none)")
    if not isinstance(value, str) and not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{attribute.name} must be a finite number >= 0, got {value!r}")
    if not isinstance(value, str):
        problem = grid_bound_problem(attribute.name, value)
        if problem:
            raise ValueError(f"{attribute.name}: {problem}")


def _currency(_inst: Any, attribute: Any, value: str) -> None:
    if value and not (len(value) == 3 and value.isascii() and value.isalpha()):
        raise ValueError(f"{attribute.name} must be a three-letter ISO 4217 code such as EUR, USD or GBP, got {value!r}")


@attrs.define
class GridOptions:
    """The core's ``[grid]`` table: the grid's carbon intensity and electricity price over time
    (:mod:`zeus_core.grid`), against which every report charges the job's energy.

    ``carbon_intensity`` (gCO2eq/kWh) and ``price`` (``currency`` per kWh): a number (a
    constant), the path of a CSV time series (relative to the job file), or a live source
    (``"electricitymaps:DE"``); the installed sources are listed by ``zeus plugins``.
    ``currency``: the ISO 4217 code of ``price`` (required with it; columns
    ``cost_<currency>``). ``start``: an ISO date-time where a replay's simulated clock
    starts on the series (the ``trace`` device); real devices use the wall clock.
    ``timezone``: the zone of times written without one, in ``start`` and in CSV files
    (an IANA name, ``UTC`` or ``+01:00``; there is no default: times are explicit).
    ``max_gap_s``: the longest a CSV row's value may hold before the next row (a longer
    gap is an error naming both rows). ``timeout_s`` and ``refresh_s``: how long a live
    source waits for its service and how long it keeps an answer.

    None of it is part of the job's identity: the grid changes what a job emits and
    pays, not what its store learned (the power profiles and costs of its batch sizes);
    a carbon-aware power policy reads it and declares its own options in ``[power]``.
    """

    carbon_intensity: Any = attrs.field(default=None, validator=_grid_value, metadata=NOT_IDENTITY)
    price: Any = attrs.field(default=None, validator=_grid_value, metadata=NOT_IDENTITY)
    currency: str = attrs.field(default="", validator=_currency, metadata=NOT_IDENTITY)
    start: str = attrs.field(default="", metadata=NOT_IDENTITY)
    timezone: str = attrs.field(default="", metadata=NOT_IDENTITY)
    max_gap_s: float = attrs.field(default=3600.0, validator=positive, metadata=NOT_IDENTITY)
    timeout_s: float = attrs.field(
        default=5.0,
        validator=[positive, between(0, MAX_GRID_TIMEOUT_S, hint=("seconds a live source waits for its service"))],
        metadata=NOT_IDENTITY,
    )
    refresh_s: float = attrs.field(default=300.0, validator=nonnegative, metadata=NOT_IDENTITY)

    def __attrs_post_init__(self) -> None:
        if self.price is not None and not self.currency:
            raise ValueError('price needs its currency: add currency = "EUR" (or the code of its money) to [grid]')
        if self.currency and self.price is None:
            raise ValueError("currency is the unit of price, and [grid] names no price: add price, or remove currency")


CORE_SECTION = "job"
#: The core's ``[grid]`` table (:class:`GridOptions`).
GRID_SECTION = "grid"
#: Every part section of a job file, in the order of :data:`zeus_core.hookspecs.PART_KINDS`.
PART_SECTIONS = tuple(section for _, _, section in PART_KINDS)
#: The order in which a job's parts are built: a factory sees the parts built before it.
BUILD_ORDER = ("device", "workload", "batch_size", "power", "frequency_plan", "allocation", "profiler")
#: The order in which planners plan, once per ``zeus run`` before any recurrence: a profile
#: first, then what reads it.
PLAN_ORDER = ("profiler", "allocation", "frequency_plan")
#: The order in which parts produce files when a job runs: planners first, then training.
RUN_ORDER = PLAN_ORDER + tuple(s for s in BUILD_ORDER if s not in PLAN_ORDER)


#: ``scheme://`` at the start of a store location that is a URL, not a path.
URL_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")


def default_store(name: str) -> Path:
    """Where a job's store is when ``job.store`` is empty: ``.zeus/<name>.sqlite`` under the current folder."""
    return Path(".zeus") / f"{name}.sqlite"


def resolve_location(store: str, job_dir: Path, default: Path) -> str:
    """``job.store`` as a location: a URL as it is, a path relative to the job file's folder,
    ``default`` (``.zeus/<name>.sqlite``) when empty."""
    if not store:
        return str(default)
    if URL_SCHEME.match(store):
        return store
    p = Path(store).expanduser()
    return str(p if p.is_absolute() else job_dir / p)


@attrs.frozen
class PartSpec:
    """One part section after validation."""

    section: str
    plugin: str
    options: Any
    registration: Registration


@attrs.define
class JobSpec:
    """A validated job: the core options, the chosen parts, and provenance."""

    path: Path
    job: JobOptions
    parts: dict[str, PartSpec]
    raw: dict[str, Any]
    overrides: dict[tuple, str]
    lines: dict[tuple, int]

    @property
    def job_dir(self) -> Path:
        return self.path.parent

    def store_location(self) -> str:
        """``job.store`` as a location for :func:`zeus_core.engine.stores.open_store`: a URL as it is, else a path."""
        return resolve_location(self.job.store, self.job_dir, default_store(self.job.name))

    def identity(self) -> dict[str, Any]:
        """What this job optimises, as declared by its options (:mod:`zeus_core.identity`):
        ``[job]`` and every part section (``plugin`` None where the job has none)."""
        out: dict[str, Any] = {CORE_SECTION: option_identity(self.job)}
        for section in PART_SECTIONS:
            part = self.parts.get(section)
            out[section] = {"plugin": None} if part is None else {"plugin": part.plugin, **option_identity(part.options)}
        return out

    def provenance(self, path: tuple) -> str:
        """Where the value at ``path`` came from: ``default``, ``file`` or ``--set``."""
        if path in self.overrides:
            return "--set"
        node: Any = self.raw_file
        for p in path:
            if isinstance(node, dict) and p in node:
                node = node[p]
            elif isinstance(node, list) and isinstance(p, int) and p < len(node):
                node = node[p]
            else:
                return "default"
        return "file"

    raw_file: dict[str, Any] = attrs.field(factory=dict)
    #: Files the job reads that an earlier part of it writes: checked when it runs.
    deferred: list[str] = attrs.field(factory=list)
    #: The ``[grid]`` table (None: the job has none; nothing is charged).
    grid: GridOptions | None = None


__all__ = [
    "JobOptions",
    "GridOptions",
    "JobSpec",
    "PartSpec",
    "job_name",
    "default_store",
    "resolve_location",
    "grid_bound_problem",
    "GRID_BOUNDS",
    "MAX_GRID_TIMEOUT_S",
    "MAX_NAME",
    "MAX_RECURRENCES",
    "MAX_EPOCHS",
    "MAX_TRIES",
    "MAX_PROCESSES",
    "MAX_SEED",
    "CORE_SECTION",
    "GRID_SECTION",
    "PART_SECTIONS",
    "BUILD_ORDER",
    "PLAN_ORDER",
    "RUN_ORDER",
    "URL_SCHEME",
]
