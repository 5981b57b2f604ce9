"""zeus-plugins-mab: Zeus (NSDI'23) policies, ``mab`` (batch size) and ``jit`` (power limit).

The policies register from :mod:`zeus_plugins_mab.plugin`. For code written for upstream
Zeus, :class:`GlobalPowerLimitOptimizer` and its optimum selectors keep upstream's
constructor over the ``jit`` policy (:mod:`zeus_plugins_mab.upstream`). Names load on first
use, so the entry point stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core.loading import lazy_exports

#: public name -> module it lives in
_EXPORTS = {
    name: "zeus_plugins_mab.upstream"
    for name in ("GlobalPowerLimitOptimizer", "OptimumSelector", "PowerLimitMeasurement", "Energy", "Time", "ZeusCost",
                 "MaxSlowdownConstraint")
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)


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
