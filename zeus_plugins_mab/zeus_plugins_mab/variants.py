"""The ``mab`` variants, each a composition of explorers and a sampler (:mod:`zeus_plugins_mab.strategies`).

A variant lists its explorers in order of preference: when a job starts, the
first whose ``create`` accepts the job explores it (guided exploration needs a
device that predicts epoch costs; the walk serves any device). Adding a way of
exploring is one :class:`~zeus_plugins_mab.strategies.Explorer` class and its
place in a list below; ``variant`` in ``job.toml`` picks the composition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from zeus_plugins_mab.gaussian_ts import GaussianTS
from zeus_plugins_mab.guided import Guided
from zeus_plugins_mab.pruning import Pruning
from zeus_plugins_mab.relative_ts import RelativeTS
from zeus_plugins_mab.strategies import Env, Explorer, Sampler
from zeus_plugins_mab.walk import Walk

if TYPE_CHECKING:
    from zeus_core import PolicyContext

#: How to start over, in every message about a stored state that does not fit.
START_OVER = "use another job.store (or zeus run --fresh) to start over"


@attrs.frozen
class Composition:
    """One variant: ``explorers`` in order of preference, the ``sampler``, and whether the
    policy learns a try's steady-state cost (``TryRecord.steady_cost``, what it would
    have cost without the power-profiling epoch: what later tries at its batch size
    cost) or, as the paper does, its cost as measured."""

    explorers: tuple[type[Explorer], ...]
    sampler: type[Sampler]
    steady_cost: bool = True

    def start_explorer(self, env: Env, batch_sizes: list[int], default: int, ctx: PolicyContext) -> Explorer:
        for cls in self.explorers:
            explorer = cls.create(env, batch_sizes, default, ctx)
            if explorer is not None:
                return explorer
        raise ValueError(f"none of the explorers {[c.name for c in self.explorers]} can explore this job; add one that serves any device")

    def restore_explorer(self, stored: dict[str, Any], env: Env) -> Explorer:
        for cls in self.explorers:
            if cls.name == stored["name"]:
                return cls.from_json(stored["state"], env)
        raise ValueError(
            f"the store holds the state of the {stored['name']!r} explorer, which this mab variant does not use "
            f"({', '.join(c.name for c in self.explorers)}); {START_OVER}"
        )

    def restore_sampler(self, stored: dict[str, Any]) -> Sampler:
        if stored["name"] != self.sampler.name:
            raise ValueError(
                f"the store holds the state of the {stored['name']!r} sampler, but this mab variant samples with "
                f"{self.sampler.name!r}; {START_OVER}"
            )
        return self.sampler.from_json(stored["state"])


#: ``variant`` -> its composition (the names are ``options.VARIANTS``).
COMPOSITIONS: dict[str, Composition] = {
    # Zeus NSDI'23 as published: two pruning rounds, then Gaussian Thompson sampling per arm.
    "paper": Composition((Pruning,), GaussianTS, steady_cost=False),
    # Guided by the device's epoch predictions where it makes them, else the walk; pooled noise.
    "improved": Composition((Guided, Walk), RelativeTS),
}
