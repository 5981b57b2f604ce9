"""zeus-plugins-mab: Zeus (NSDI'23) policies, ``mab`` (batch size) and ``jit`` (power limit).

The policies register from :mod:`zeus_plugins_mab.plugin`. For code written for upstream
Zeus, :class:`GlobalPowerLimitOptimizer` and its optimum selectors keep upstream's
constructor over the ``jit`` policy (:mod:`zeus_plugins_mab.upstream`). Names load on first
use, so the entry point stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> module it lives in
_EXPORTS = {
    name: "zeus_plugins_mab.upstream"
    for name in ("GlobalPowerLimitOptimizer", "OptimumSelector", "PowerLimitMeasurement", "Energy", "Time", "ZeusCost",
                 "MaxSlowdownConstraint")
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'zeus_plugins_mab' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # for type checkers; at run time the names load lazily
    from zeus_plugins_mab.upstream import (
        Energy,
        GlobalPowerLimitOptimizer,
        MaxSlowdownConstraint,
        OptimumSelector,
        PowerLimitMeasurement,
        Time,
        ZeusCost,
    )
