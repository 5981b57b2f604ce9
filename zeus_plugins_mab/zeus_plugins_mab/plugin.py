"""Registers ``mab`` (batch size), ``jit`` and ``carbon-aware`` (power limit) through the ``zeus`` entry point.

The policies (and numpy, scipy) are imported when a job builds them, not when
``zeus`` loads the plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core import BuildContext, EpochPredictor, JobOptions, hookimpl
from zeus_core.hookspecs import RegisterPart

if TYPE_CHECKING:
    from zeus_plugins_mab.carbon import CarbonAwarePolicy
    from zeus_plugins_mab.jit import JitPowerPolicy
    from zeus_plugins_mab.options import CarbonAwareOptions, JitOptions, MabOptions
    from zeus_plugins_mab.policy import MabPolicy


def _job(context: BuildContext) -> JobOptions:
    """The job's ``[job]`` options: a policy is built inside a job (``context.job`` is None only outside one)."""
    assert context.job is not None, "a policy is built for a job"
    return context.job


def make_mab(options: MabOptions, context: BuildContext) -> MabPolicy:
    """Zeus's batch-size policy: exploration, then Thompson sampling across recurrences.

    The device (built first) lends its epoch predictions when it has them
    (:class:`zeus_core.EpochPredictor`, e.g. the ``trace`` device), for explorers that
    plan with them (guided exploration); on other devices the improved variant walks."""
    from zeus_plugins_mab.policy import MabPolicy

    device = context.parts.get("device")
    predict = device.predict_epoch if isinstance(device, EpochPredictor) else None
    return MabPolicy(options, job_seed=_job(context).seed, predict_epoch=predict)


def make_jit(options: JitOptions, context: BuildContext) -> JitPowerPolicy:
    """Zeus's JIT power policy: profile every limit in the first epoch at a batch size, hold the cheapest."""
    from zeus_plugins_mab.jit import JitPowerPolicy

    return JitPowerPolicy(options, job_eta=_job(context).eta_knob)


def make_carbon_aware(options: CarbonAwareOptions, context: BuildContext) -> CarbonAwarePolicy:
    """The JIT's profile, then a limit per period of the job's [grid] carbon intensity (lower while dirty)."""
    from zeus_plugins_mab.carbon import CarbonAwarePolicy

    return CarbonAwarePolicy(options, job_eta=_job(context).eta_knob, grid=context.grid)


@hookimpl
def zeus_register_batch_size_policies(register: RegisterPart) -> None:
    register(
        "mab",
        make_mab,
        options="zeus_plugins_mab.options:MabOptions",
        help="Zeus: exploration + Thompson sampling over batch sizes (variant improved or paper).",
    )


@hookimpl
def zeus_register_power_policies(register: RegisterPart) -> None:
    register(
        "jit",
        make_jit,
        options="zeus_plugins_mab.options:JitOptions",
        help="Zeus: profile each power limit in the first epoch, hold the cheapest.",
    )
    register(
        "carbon-aware",
        make_carbon_aware,
        options="zeus_plugins_mab.options:CarbonAwareOptions",
        help="The JIT's profile, then per grid period a lower limit while the grid is dirty, a higher one while clean, "
        "in the carbon-blind JIT's time (reads [grid]).",
    )
