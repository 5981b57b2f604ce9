"""zeus-core: the contract between zeus and its plugins, and the engine that composes them.

``import zeus_core`` is the whole API a plugin or a user script needs::

    from zeus_core import hookimpl, PowerLimitControl, RunSession, TryRecord, write_atomic

Names are loaded on first use, so ``import zeus_core`` (and every ``zeus``
command that does not need a name) stays fast. ``docs/api.md`` lists them all;
the public submodules are ``zeus_core.validators`` (attrs validators for
options classes) and the modules the names below come from.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> module it lives in
_EXPORTS: dict[str, str] = {
    # hooks
    "hookimpl": "zeus_core.hookspecs",
    "PROJECT": "zeus_core.hookspecs",
    # what a part is and may declare
    "Session": "zeus_core.parts",
    "Workload": "zeus_core.parts",
    "BatchSizePolicy": "zeus_core.parts",
    "PowerPolicy": "zeus_core.parts",
    "Planner": "zeus_core.parts",
    "OffersBatchSizes": "zeus_core.parts",
    "EpochCostPredictor": "zeus_core.parts",
    "RankCombiner": "zeus_core.parts",
    "ServesRanks": "zeus_core.parts",
    "TryCostBound": "zeus_core.parts",
    "IterationControl": "zeus_core.parts",
    "SteadyEpochCost": "zeus_core.parts",
    "NeedsDevice": "zeus_core.parts",
    "MergesState": "zeus_core.parts",
    "HasIdentity": "zeus_core.parts",
    "ChecksFiles": "zeus_core.parts",
    "WritesFiles": "zeus_core.parts",
    "FileChecks": "zeus_core.filechecks",
    "NOT_IDENTITY": "zeus_core.identity",
    "IdentityMismatch": "zeus_core.identity",
    "Summarizes": "zeus_core.parts",
    "Reports": "zeus_core.parts",
    "WritesOutputs": "zeus_core.parts",
    "Closeable": "zeus_core.parts",
    "DeviceGroup": "zeus_core.device",
    "PowerLimitControl": "zeus_core.device",
    "PerDevicePowerLimits": "zeus_core.device",
    "ClockControl": "zeus_core.device",
    "PowerReadings": "zeus_core.device",
    "PowerDomainReadings": "zeus_core.device",
    "TemperatureReadings": "zeus_core.device",
    "GpuSync": "zeus_core.device",
    "SupportedPowerLimits": "zeus_core.device",
    "EpochPredictor": "zeus_core.device",
    "EpochPrediction": "zeus_core.device",
    "DEVICE_CAPABILITIES": "zeus_core.device",
    "PART_CAPABILITIES": "zeus_core.parts",
    # what parts are handed
    "BuildContext": "zeus_core.contexts",
    "PolicyContext": "zeus_core.contexts",
    "RunSession": "zeus_core.session",
    "target_reached": "zeus_core.session",
    # errors
    "DeviceError": "zeus_core.errors",
    "PartMismatch": "zeus_core.errors",
    "RunFailed": "zeus_core.errors",
    "JobError": "zeus_core.job",
    "PluginError": "zeus_core.registry",
    "StoreError": "zeus_core.store",
    "StoreUnavailable": "zeus_core.store",
    "AllocationError": "zeus_core.allocation",
    "DeviceOpenError": "zeus_core.devices",
    "RestoreError": "zeus_core.journal",
    # results and measurement
    "TryRecord": "zeus_core.results",
    "JobSummary": "zeus_core.results",
    "TRY_COLUMNS": "zeus_core.results",
    "Measurement": "zeus_core.measurement",
    "format_joules": "zeus_core.measurement",
    "Monitor": "zeus_core.monitor",
    "DeviceSet": "zeus_core.monitor",
    "Window": "zeus_core.monitor",
    "make_sync": "zeus_core.monitor",
    # shared rules
    "zeus_cost": "zeus_core.cost",
    "check_eta": "zeus_core.cost",
    "cost_per_iteration": "zeus_core.cost",
    "pareto_frontier": "zeus_core.cost",
    "lower_convex_hull": "zeus_core.cost",
    "epochs_within": "zeus_core.stopping",
    "steady_state_cost": "zeus_core.stopping",
    "write_atomic": "zeus_core.files",
    "make_console": "zeus_core.consoles",
    "atomic_path": "zeus_core.files",
    "load_callable": "zeus_core.loading",
    "lazy_exports": "zeus_core.loading",
    "savings": "zeus_core.comparison",
    "comparison_table": "zeus_core.comparison",
    "ComparisonRow": "zeus_core.comparison",
    "TOTAL_KEYS": "zeus_core.comparison",
    # devices, settings, allocations
    "open_device": "zeus_core.devices",
    "open_devices": "zeus_core.devices",
    "SettingsGuard": "zeus_core.journal",
    "restore_pending": "zeus_core.journal",
    "AllocationPlan": "zeus_core.allocation",
    "RankPlan": "zeus_core.allocation",
    "read_allocation": "zeus_core.allocation",
    # jobs, registry, store, runner
    "JobOptions": "zeus_core.job",
    "JobSpec": "zeus_core.job",
    "load_job": "zeus_core.job",
    "parse_override": "zeus_core.job",
    "Registry": "zeus_core.registry",
    "get_registry": "zeus_core.registry",
    "load_plugins": "zeus_core.registry",
    "Store": "zeus_core.store",
    "StoreInfo": "zeus_core.store",
    "JobStore": "zeus_core.stores",
    "StoreTransaction": "zeus_core.stores",
    "open_store": "zeus_core.stores",
    "mask": "zeus_core.stores",
    "parse_url": "zeus_core.stores",
    "Runner": "zeus_core.runner",
    # zeus inside the user's own loop: measurement, power and batch-size optimizers
    "ZeusMonitor": "zeus_core.zeusmonitor",
    "PowerLimitOptimizer": "zeus_core.optimizers",
    "BatchSizeOptimizer": "zeus_core.optimizers",
    "BatchSizeTrial": "zeus_core.optimizers",
    "TrainerHooks": "zeus_core.trainer",
    "TrainerCallbackMixin": "zeus_core.trainer",
    "counted_energy": "zeus_core.optimizers",
    "JobHistory": "zeus_core.trials",
    # ranks of one job
    "ProcessGroup": "zeus_core.ranks",
    "process_group": "zeus_core.ranks",
    "combine_measurements": "zeus_core.ranks",
    "capability_members": "zeus_core.device",
    "copy_capabilities": "zeus_core.device",
    # trials: the history of a recurring job, here or through a service
    "Trials": "zeus_core.trials",
    "Trial": "zeus_core.trials",
    "TrialService": "zeus_core.trials",
    "ServesTrials": "zeus_core.trialsetup",
    "StalePowerState": "zeus_core.trials",
    "merge_power_state": "zeus_core.trials",
    "state_digest": "zeus_core.trials",
    "TrialSetup": "zeus_core.trialsetup",
    "SetupError": "zeus_core.trialsetup",
    "build_trials": "zeus_core.trialsetup",
}

#: names whose attribute in their module differs from the public name
_RENAMED = {"ComparisonRow": "Row", "load_plugins": "load"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'zeus_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), _RENAMED.get(name, name))
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # for type checkers and IDEs; at run time the names load lazily
    from zeus_core.allocation import AllocationError, AllocationPlan, RankPlan, read_allocation
    from zeus_core.comparison import TOTAL_KEYS, comparison_table, savings
    from zeus_core.comparison import Row as ComparisonRow
    from zeus_core.consoles import make_console
    from zeus_core.contexts import BuildContext, PolicyContext
    from zeus_core.filechecks import FileChecks
    from zeus_core.cost import check_eta, cost_per_iteration, lower_convex_hull, pareto_frontier, zeus_cost
    from zeus_core.device import (
        DEVICE_CAPABILITIES,
        capability_members,
        copy_capabilities,
        ClockControl,
        DeviceGroup,
        EpochPrediction,
        EpochPredictor,
        GpuSync,
        PerDevicePowerLimits,
        PowerLimitControl,
        PowerDomainReadings,
        PowerReadings,
        SupportedPowerLimits,
        TemperatureReadings,
    )
    from zeus_core.devices import DeviceOpenError, open_device, open_devices
    from zeus_core.errors import DeviceError, PartMismatch, RunFailed
    from zeus_core.files import atomic_path, write_atomic
    from zeus_core.hookspecs import PROJECT, hookimpl
    from zeus_core.identity import NOT_IDENTITY, IdentityMismatch
    from zeus_core.job import JobError, JobOptions, JobSpec, load_job, parse_override
    from zeus_core.journal import RestoreError, SettingsGuard, restore_pending
    from zeus_core.loading import lazy_exports, load_callable
    from zeus_core.measurement import Measurement, format_joules
    from zeus_core.monitor import DeviceSet, Monitor, Window, make_sync
    from zeus_core.parts import (
        PART_CAPABILITIES,
        BatchSizePolicy,
        ChecksFiles,
        Closeable,
        EpochCostPredictor,
        HasIdentity,
        IterationControl,
        MergesState,
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
    from zeus_core.registry import PluginError, Registry, get_registry
    from zeus_core.registry import load as load_plugins
    from zeus_core.results import TRY_COLUMNS, JobSummary, TryRecord
    from zeus_core.runner import Runner
    from zeus_core.session import RunSession, target_reached
    from zeus_core.stopping import epochs_within, steady_state_cost
    from zeus_core.store import Store, StoreError, StoreInfo, StoreUnavailable
    from zeus_core.optimizers import BatchSizeOptimizer, BatchSizeTrial, PowerLimitOptimizer, counted_energy
    from zeus_core.ranks import ProcessGroup, combine_measurements, process_group
    from zeus_core.stores import JobStore, StoreTransaction, mask, open_store, parse_url
    from zeus_core.trainer import TrainerCallbackMixin, TrainerHooks
    from zeus_core.trials import (
        JobHistory,
        StalePowerState,
        Trial,
        Trials,
        TrialService,
        merge_power_state,
        state_digest,
    )
    from zeus_core.trialsetup import ServesTrials, SetupError, TrialSetup, build_trials
    from zeus_core.zeusmonitor import ZeusMonitor
