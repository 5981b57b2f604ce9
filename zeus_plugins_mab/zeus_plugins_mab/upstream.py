"""Upstream Zeus's ``GlobalPowerLimitOptimizer``, mapped onto :class:`zeus_core.PowerLimitOptimizer` and ``jit``.

Code written for upstream runs after changing its imports::

    from zeus_core import ZeusMonitor
    from zeus_plugins_mab import GlobalPowerLimitOptimizer

    monitor = ZeusMonitor(gpu_indices=[0, 1, 2, 3])
    plo = GlobalPowerLimitOptimizer(monitor)
    for epoch in range(100):
        plo.on_epoch_begin()
        for x, y in train_dataloader:
            plo.on_step_begin()
            ...
            plo.on_step_end()
        plo.on_epoch_end()

The constructor's arguments map onto the ``jit`` policy's options: ``warmup_steps``
-> ``warmup_iters``, ``profile_steps`` -> ``measure_iters``, ``pl_step`` -> ``step_w``,
``wait_steps`` -> ``wait_iters``; the optimum selectors (:class:`Energy`,
:class:`Time`, :class:`ZeusCost`, :class:`MaxSlowdownConstraint`) -> ``select``
(and ``eta_knob``, ``max_slowdown``); any other :class:`OptimumSelector` subclass
chooses through the policy's ``selector``. ``profile_path`` keeps upstream's file:
an existing one is loaded and its optimum held from the first step (nothing is
profiled); otherwise the profile is written there once every limit is measured.
As upstream, an epoch end cuts a window (measured again next epoch, the limit
back at the maximum meanwhile), and ``on_epoch_begin`` is optional: the first
step after an epoch end begins the next epoch.

Beyond upstream: ``job=`` keeps the choice in the job's store (shared with
``zeus run`` of the same job, see :class:`zeus_core.PowerLimitOptimizer`), and
under a launcher the ranks are one job (rank 0 profiles, every rank's GPUs
follow, energy summed over ranks).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from zeus_core import PowerLimitOptimizer, ZeusMonitor, write_atomic, zeus_cost
from zeus_core.datafiles import DataFileError
from zeus_core.engine import process_group
from zeus_core.selection import Energy, MaxSlowdownConstraint, OptimumSelector, PowerLimitMeasurement, Time, ZeusCost, read_power_profile

BUILT_IN = (ZeusCost, Energy, Time, MaxSlowdownConstraint)


def _jit_options(
    selector: OptimumSelector, wait_steps: int, warmup_steps: int, profile_steps: int, pl_step: float
) -> tuple[dict[str, Any], float]:
    """The ``jit`` table and eta for an upstream selector (built-in ones by option, others by ``selector``)."""
    options: dict[str, Any] = {
        "wait_iters": wait_steps,
        "warmup_iters": warmup_steps,
        "measure_iters": profile_steps,
        "step_w": float(pl_step),
    }
    eta = 0.5
    if type(selector) is ZeusCost:
        eta = selector.eta_knob
    elif type(selector) is Energy:
        options["select"] = "energy"
    elif type(selector) is Time:
        options["select"] = "time"
    elif type(selector) is MaxSlowdownConstraint:
        options.update(select="max-slowdown", max_slowdown=selector.factor)
    return options, eta


class GlobalPowerLimitOptimizer:
    """Upstream's power-limit optimizer: profile every limit from the highest down, hold the optimum."""

    def __init__(
        self,
        monitor: Any,
        optimum_selector: OptimumSelector | None = None,
        wait_steps: int = 1,
        warmup_steps: int = 10,
        profile_steps: int = 40,
        pl_step: int = 25,
        profile_path: str | Path | None = None,
        *,
        job: str | None = None,
        store: str | Path | None = None,
        batch_size: int | None = None,
    ) -> None:
        for name, value, low in (
            ("wait_steps", wait_steps, 0),
            ("warmup_steps", warmup_steps, 0),
            ("profile_steps", profile_steps, 1),
            ("pl_step", pl_step, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
                raise ValueError(f"{name} must be {'positive' if low else 'non-negative'}, got {value!r}")
        selector = optimum_selector if optimum_selector is not None else ZeusCost(eta_knob=0.5)
        if not isinstance(selector, OptimumSelector):
            raise ValueError(f"optimum_selector must be an OptimumSelector (Energy(), Time(), ZeusCost(eta), ...), got {selector!r}")
        self.optimum_selector = selector
        self.profile_steps = int(profile_steps)
        self.profile_path = None if profile_path is None else Path(profile_path)
        options, eta = _jit_options(selector, int(wait_steps), int(warmup_steps), int(profile_steps), pl_step)
        self._key = str(batch_size or 0)
        self.eta = eta
        state = None
        if self.profile_path is not None and self.profile_path.exists():
            state = {"choices": {self._key: self._load_profile(self.profile_path, monitor)}}
        self._saved = state is not None
        self.plo = PowerLimitOptimizer(monitor, "jit", job, options=options, eta_knob=eta, batch_size=batch_size, store=store, state=state)
        self.monitor = monitor
        if type(selector) not in BUILT_IN:  # the user's own: asked through the policy's selector
            self.plo.policy.selector = self._custom
        self._announced = False
        self._in_epoch = False

    # -- upstream's profile file --

    def _load_profile(self, path: Path, monitor: Any) -> dict[str, Any]:
        try:
            rows = read_power_profile(path)
        except DataFileError as e:
            raise ValueError(f"profile_path: {e}\nremove the file to profile again") from None
        n = self.profile_steps
        steered = monitor.controllable() if isinstance(monitor, ZeusMonitor) else None
        # the job's maximum power, as PowerLimitOptimizer.max_power_w sums it over ranks (identical GPUs per rank)
        top = float((steered[0] if steered else monitor.devices).max_power_w) * process_group().world_size
        if type(self.optimum_selector) is ZeusCost:  # the choice the jit policy made when it profiled
            chosen = float(min(rows, key=lambda m: zeus_cost(m.energy, m.time, self.eta, top)).power_limit)
        else:
            chosen = float(self.optimum_selector.select(rows))
        row = next((m for m in rows if float(m.power_limit) == chosen), None)
        if row is None:
            raise ValueError(f"profile_path {path}: the selector chose {chosen:g} W, which the profile does not list")
        return {
            "power_limit": chosen,
            "cost_per_iteration": zeus_cost(row.energy / n, row.time / n, self.eta, top),
            "iterations_per_epoch": None,
            "loaded": str(path),
            "profile": {str(float(m.power_limit)): [m.time / n, m.energy / n] for m in rows},
        }

    def _custom(self, rows: list[tuple[float, float, float]]) -> float:
        n = self.profile_steps
        return float(self.optimum_selector.select([PowerLimitMeasurement(int(p), e * n, t * n) for p, t, e in rows]))

    def _chosen(self) -> None:
        """Once the policy chose (rank 0): say so, and write upstream's profile file."""
        choice = self.plo.policy.choices.get(self._key) if self.plo.session is not None else None
        if choice is None:
            return
        self._announced = True
        n = self.profile_steps
        profile = choice.get("profile", {})
        if self.profile_path is not None and not self._saved and profile:
            rows = [
                {"power_limit": int(float(p)), "energy": e * n, "time": t * n}
                for p, (t, e) in sorted(profile.items(), key=lambda kv: -float(kv[0]))
            ]
            write_atomic(self.profile_path, json.dumps({"measurements": rows}, indent=4) + "\n")
            self._saved = True
        print(
            f"zeus: GlobalPowerLimitOptimizer holds {choice['power_limit']:g} W "
            f"({'loaded from ' + str(self.profile_path) if choice.get('loaded') else f'the optimum of {len(profile)} profiled limits'})",
            file=sys.stderr,
            flush=True,
        )

    # -- the training loop's events --

    def on_train_begin(self) -> None:
        pass

    def on_epoch_begin(self) -> None:
        if not self._in_epoch:
            self.plo.on_epoch_begin()
            self._in_epoch = True

    def on_step_begin(self) -> None:
        if not self._in_epoch:
            self.on_epoch_begin()
        self.plo.on_step_begin()
        if not self._announced and self.plo.profiling:
            self._chosen()

    def on_step_end(self) -> None:
        self.plo.on_step_end()

    def on_epoch_end(self) -> None:
        if self._in_epoch:
            self.plo.on_epoch_end()
            self._in_epoch = False
        if not self._announced:
            self._chosen()

    def on_evaluate(self, metric: float) -> None:
        pass

    def on_train_end(self) -> None:
        self.close()

    @property
    def optimal_power_limit(self) -> float | None:
        """The limit held once profiling is done (rank 0; None before, and on other ranks)."""
        choice = self.plo.policy.choices.get(self._key) if self.plo.session is not None else None
        return None if choice is None else float(choice["power_limit"])

    def close(self) -> None:
        """Put the GPUs back at the limit they had (also done on exit, signals and after a kill)."""
        self.plo.close()
