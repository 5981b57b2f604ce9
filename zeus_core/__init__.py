"""zeus-core: the contract between zeus and its plugins, and the engine that composes them.

``import zeus_core`` is the whole API a plugin author or a script user needs::

    from zeus_core import hookimpl, PowerLimitControl, BuildContext, TryRecord, write_atomic

* the hooks (:mod:`zeus_core.hookspecs`) and what a part is and may declare
  (:mod:`zeus_core.parts`, :mod:`zeus_core.device`);
* what a part is handed (:class:`BuildContext`, :class:`PolicyContext`,
  :class:`JobOptions`) and what it reports (:class:`TryRecord`, :class:`JobSummary`,
  :class:`Measurement`);
* the shared rules (the cost metric, Pareto helpers, early stopping, savings),
  options helpers, files, device settings that are put back, and the errors;
* zeus inside the user's own loop: :class:`ZeusMonitor`, :class:`PowerLimitOptimizer`,
  :class:`BatchSizeOptimizer`, :func:`open_device`.

Beyond this list, a specialised plugin imports the literal ``__all__`` of the
toolkit modules that docs/architecture.md lists ("What a plugin may import"), e.g.
``zeus_core.validators`` for options classes, ``zeus_core.datafiles`` for the data
files a job names, ``zeus_core.devicekit`` and ``zeus_core.daemon`` for devices. The
engine that composes parts into a running job (runner, job-file validation,
histories, stores, ranks, the registry) lives under :mod:`zeus_core.engine`; plugins
that must (a store backend, a history service) use only its door, the literal
``zeus_core.engine.__all__``.

The in-loop objects, measurement windows, allocations, savings and the
early-stopping rule load on first use, so that ``import zeus_core`` (and every
``zeus`` command that does not need them) stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import zeus_core.logs  # noqa: F401 - the ``zeus`` logger's NullHandler; nothing is configured
from zeus_core.contexts import BuildContext, PolicyContext
from zeus_core.cost import lower_convex_hull, pareto_frontier, zeus_cost
from zeus_core.device import (
    ClockControl,
    ControlPaths,
    DeviceGroup,
    EpochPrediction,
    EpochPredictor,
    GpuSync,
    PerDevicePowerLimits,
    PowerDomainReadings,
    PowerLimitControl,
    PowerReadings,
    SupportedPowerLimits,
    TemperatureReadings,
)
from zeus_core.errors import DeviceError, PartMismatch, RunFailed, ZeusError
from zeus_core.files import FileChecks, write_atomic
from zeus_core.hookspecs import hookimpl
from zeus_core.identity import NOT_IDENTITY
from zeus_core.job import JobOptions
from zeus_core.journal import SettingsGuard
from zeus_core.loading import lazy_exports, load_callable
from zeus_core.measurement import Measurement
from zeus_core.parts import (
    BatchSizePolicy,
    ChecksFiles,
    Closeable,
    EpochCostPredictor,
    HasIdentity,
    IterationControl,
    NeedsDevice,
    OffersBatchSizes,
    Planner,
    PowerPolicy,
    RankCombiner,
    Reports,
    ServesRanks,
    Session,
    SteadyEpochCost,
    Summarizes,
    TryCostBound,
    Workload,
    WritesFiles,
    WritesOutputs,
)
from zeus_core.results import JobSummary, TryRecord

if TYPE_CHECKING:  # loaded on first use (lazy_exports reads this list); imported here for type checkers and editors
    from zeus_core.allocation import AllocationPlan, read_allocation
    from zeus_core.comparison import savings
    from zeus_core.engine.assembly import open_device
    from zeus_core.inloop.batch_size import BatchSizeOptimizer
    from zeus_core.inloop.monitor import ZeusMonitor
    from zeus_core.inloop.power import PowerLimitOptimizer
    from zeus_core.stopping import epochs_within
    from zeus_core.windows import Monitor

__all__ = [
    # hooks
    "hookimpl",
    # what a part is
    "Session",
    "Workload",
    "BatchSizePolicy",
    "PowerPolicy",
    "Planner",
    # what a part may declare
    "OffersBatchSizes",
    "EpochCostPredictor",
    "RankCombiner",
    "ServesRanks",
    "TryCostBound",
    "IterationControl",
    "SteadyEpochCost",
    "NeedsDevice",
    "HasIdentity",
    "ChecksFiles",
    "WritesFiles",
    "Summarizes",
    "Reports",
    "WritesOutputs",
    "Closeable",
    # what a device is and may do
    "DeviceGroup",
    "PowerLimitControl",
    "PerDevicePowerLimits",
    "ClockControl",
    "PowerReadings",
    "PowerDomainReadings",
    "TemperatureReadings",
    "GpuSync",
    "SupportedPowerLimits",
    "ControlPaths",
    "EpochPredictor",
    "EpochPrediction",
    # what a part is handed, and what it reports
    "BuildContext",
    "PolicyContext",
    "JobOptions",
    "TryRecord",
    "JobSummary",
    "Measurement",
    "Monitor",
    # options helpers
    "NOT_IDENTITY",
    "FileChecks",
    "load_callable",
    # errors
    "ZeusError",
    "PartMismatch",
    "DeviceError",
    "RunFailed",
    # shared rules
    "zeus_cost",
    "pareto_frontier",
    "lower_convex_hull",
    "epochs_within",
    "savings",
    # files, device settings, allocations
    "write_atomic",
    "SettingsGuard",
    "AllocationPlan",
    "read_allocation",
    # zeus inside the user's own loop
    "ZeusMonitor",
    "PowerLimitOptimizer",
    "BatchSizeOptimizer",
    "open_device",
]

__getattr__ = lazy_exports(__name__)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
