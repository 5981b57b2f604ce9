"""zeus-plugins-mab: Zeus (NSDI'23) policies, ``mab`` (batch size) and ``jit`` (power limit).

The policies register from :mod:`zeus_plugins_mab.plugin`. For code written for upstream
Zeus, :class:`GlobalPowerLimitOptimizer` and its optimum selectors keep upstream's
constructor over the ``jit`` policy (:mod:`zeus_plugins_mab.upstream`). Names load on first
use, so the entry point stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core.loading import lazy_exports

if TYPE_CHECKING:  # loaded on first use (lazy_exports reads this list), so the entry point stays light
    from zeus_plugins_mab.upstream import (
        Energy,
        GlobalPowerLimitOptimizer,
        MaxSlowdownConstraint,
        OptimumSelector,
        PowerLimitMeasurement,
        Time,
        ZeusCost,
    )

__all__ = [
    "Energy",
    "GlobalPowerLimitOptimizer",
    "MaxSlowdownConstraint",
    "OptimumSelector",
    "PowerLimitMeasurement",
    "Time",
    "ZeusCost",
]
__getattr__ = lazy_exports(__name__)
