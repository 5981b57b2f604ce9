"""Registers ``mab`` (batch size) and ``jit`` (power limit) through the ``zeus`` entry point."""

from __future__ import annotations

from typing import Any

from zeus_core import EpochPredictor, hookimpl

from zeus_plugins_mab.jit import JitPowerPolicy
from zeus_plugins_mab.options import JitOptions, MabOptions
from zeus_plugins_mab.policy import MabPolicy


def make_mab(options: MabOptions, context: Any) -> MabPolicy:
    """Zeus's batch-size policy: pruning, then Gaussian Thompson sampling across recurrences.

    The device (built first) lends its epoch predictions when it has them
    (``predict_epoch``, e.g. the ``trace`` device); others leave the policy walking."""
    device = context.parts.get("device")
    predict = device.predict_epoch if isinstance(device, EpochPredictor) else None
    return MabPolicy(options, job_seed=context.job.seed, predict_epoch=predict)


def make_jit(options: JitOptions, context: Any) -> JitPowerPolicy:
    """Zeus's JIT power policy: profile every limit in the first epoch at a batch size, hold the cheapest."""
    return JitPowerPolicy(options, job_eta=context.job.eta_knob)


@hookimpl
def zeus_register_batch_size_policies(register):
    register("mab", make_mab, options=MabOptions, help="Zeus: pruning + Gaussian Thompson sampling over batch sizes.")


@hookimpl
def zeus_register_power_policies(register):
    register("jit", make_jit, options=JitOptions, help="Zeus: profile each power limit in the first epoch, hold the cheapest.")
