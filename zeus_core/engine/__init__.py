"""The engine: what composes registered parts into a running job, for the core's commands and
for the plugins that must reach behind the contract (a store backend, a history service, a
launcher's ranks). ``import zeus_core`` is the contract; each module here holds one step:

* :mod:`~zeus_core.engine.registry`: plugins found through the ``zeus`` entry points;
* :mod:`~zeus_core.engine.validation`: a job file read and checked, every problem at once;
* :mod:`~zeus_core.engine.assembly`: a job (a file, a script's objects, a client's setup)
  turned into its parts, checked to fit, with its identity and where its history is kept;
* :mod:`~zeus_core.engine.runner`: the recurring-job loop of ``zeus run``;
* :mod:`~zeus_core.engine.session`: one try, as a workload trains it;
* :mod:`~zeus_core.engine.history`: recurrences and tries in the store, and what policies learn;
* :mod:`~zeus_core.engine.remote`: a history kept by a service (``zeus serve``);
* :mod:`~zeus_core.engine.ranks`: the ranks of one job, rank 0 deciding for all;
* :mod:`~zeus_core.engine.stores`: where a job's state lives (SQLite, or a backend's URL);
* :mod:`~zeus_core.engine.lifecycle` and :mod:`~zeus_core.engine.outputs`: a run's life to its end,
  and the files it leaves.

The modules are the engine's own: a plugin imports the engine only through this package's
``__all__`` below (the door, checked by ``tests/core/test_contract.py``), so that the
modules behind it can move without changing any plugin. Each name loads on first use,
so ``import zeus_core.engine`` costs nothing until a name is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core.loading import lazy_exports

if TYPE_CHECKING:  # loaded on first use (lazy_exports reads this list); imported here for type checkers and editors
    from zeus_core.engine.assembly import Assembly, DeviceOpenError, build_device, build_history
    from zeus_core.engine.history import (
        FreshRefused,
        History,
        StalePowerState,
        TryPlan,
        TryRecorded,
        claim_waiting,
        gone_reason,
        merge_power_state,
        state_digest,
    )
    from zeus_core.engine.lifecycle import run_to_end
    from zeus_core.engine.outputs import write_outputs
    from zeus_core.engine.owner import this_process
    from zeus_core.engine.provenance import now as utc_now
    from zeus_core.engine.ranks import Follower, LeaderFailed, ProtocolError, combine_measurements, lead, process_group
    from zeus_core.engine.registry import CORE_PLUGIN, Registry, get_registry
    from zeus_core.engine.registry import load as load_plugins
    from zeus_core.engine.remote import HistorySetup, SetupError
    from zeus_core.engine.runner import Runner
    from zeus_core.engine.session import RunSession
    from zeus_core.engine.signals import open_grid
    from zeus_core.engine.statekeys import OPEN_KEY
    from zeus_core.engine.stores.checks import TRY_FIELDS, content_problems
    from zeus_core.engine.stores.locations import mask as mask_secrets
    from zeus_core.engine.stores.locations import open_store, parse_url
    from zeus_core.engine.validation import JobError, load_job, parse_override

__all__ = [
    # plugins found, and a job file read
    "CORE_PLUGIN",
    "Registry",
    "get_registry",
    "load_plugins",
    "JobError",
    "load_job",
    "parse_override",
    # a job turned into parts, and run to its end
    "Assembly",
    "DeviceOpenError",
    "build_device",
    "build_history",
    "Runner",
    "RunSession",
    "run_to_end",
    "write_outputs",
    "utc_now",
    "open_grid",
    # a job's history, here or kept by a service
    "History",
    "TryPlan",
    "TryRecorded",
    "FreshRefused",
    "StalePowerState",
    "claim_waiting",
    "gone_reason",
    "merge_power_state",
    "state_digest",
    "this_process",
    "OPEN_KEY",
    "HistorySetup",
    "SetupError",
    # where the history lives
    "open_store",
    "parse_url",
    "mask_secrets",
    "TRY_FIELDS",
    "content_problems",
    # the ranks of one job
    "process_group",
    "lead",
    "Follower",
    "LeaderFailed",
    "ProtocolError",
    "combine_measurements",
]

__getattr__ = lazy_exports(__name__)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
