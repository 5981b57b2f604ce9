"""Options of the ``mab`` batch-size policy and the ``jit`` power policy (``job.toml`` tables)."""

from __future__ import annotations

import math

import attrs
from attrs.validators import optional

from zeus_core import NOT_IDENTITY
from zeus_core.unset import unset
from zeus_core.validators import at_least, between, distinct_numbers, one_of

VARIANTS = ("improved", "paper")
SELECTS = ("cost", "energy", "time", "max-slowdown")


@attrs.define
class MabOptions:
    """``[batch_size] plugin = "mab"``.

    ``variant``: ``improved`` (this project's default, see the README) or
    ``paper`` (Zeus NSDI'23 as published: two pruning rounds, flat-prior
    Gaussian Thompson sampling); each is a composition of an explorer and a
    sampler (``variants.py``). ``default``: the user's batch size, where
    pruning starts (0: the workload's default). ``batch_sizes``: the arms
    (empty: the workload's list). ``prior_mean``/``prior_precision``: the
    normal prior of each arm's mean reward (negative cost); precision 0 is a
    flat prior. ``window``: how many recent observations of an arm the
    posterior uses (0: all). ``seed``: the sampler's seed (left out: job.seed).
    ``eta_knob``/``beta_knob``: left out, the job's; eta weighs the reward's
    cost, beta scales the penalty of a try the cost bound did not let start.
    Paper variant only: ``pruning_rounds``, ``num_exploration``. Improved
    variant only: ``tolerance`` and ``patience`` (a walk stops once
    ``patience`` tries in a row cost more than 1 + tolerance times the best
    so far) and ``cv0`` (prior relative noise of
    a try's cost), for the walk; ``use_predictions`` (explore by a model of
    epochs to target when the device predicts epoch costs, see
    ``guided.py``), ``min_improvement_prob`` (explore a batch size only if
    the model gives it at least this chance of beating the best so far),
    ``sigma_w`` (how far, in log epochs, one batch size may depart from the
    model's curve) and ``sigma_slope`` (prior spread of an extra trend of log
    epochs per octave of batch size), for the model; ``explore_stop`` (stop an
    exploratory try where a restart at the best size is expected to be cheaper
    than finishing it, see ``Guided.stop_epochs``), ``fail_prob`` (the prior
    chance that a run never reaches the target, for that rule) and
    ``stop_margin_sds`` (never stop before the try has cost the best size's
    expected cost plus this many noise sds); ``explore_bound_sds`` (stop an
    exploratory try this many noise sds above the best known cost; off);
    ``explore_budget`` (guided exploration: the tries that stop before the
    target may together waste at most this fraction of ``horizon`` x the best
    size's expected cost; once spent, an exploratory try stops once it costs
    the best size's cost plus two noise sds; ``inf``: no budget) and
    ``horizon`` (how many recurrences the job is expected to have; 0: the
    paper's 2 x batch sizes x power limits).
    """

    variant: str = attrs.field(default="improved", validator=one_of(*VARIANTS))
    default: int = attrs.field(default=0, validator=at_least(0), metadata=unset("the workload's default batch size"))
    batch_sizes: list[int] = attrs.field(
        factory=list, validator=distinct_numbers(1, what="batch sizes", allow_empty=True), metadata=unset("the workload's list")
    )
    prior_mean: float = 0.0
    prior_precision: float = attrs.field(default=0.0, validator=at_least(0.0))
    window: int = attrs.field(default=0, validator=at_least(0), metadata=unset("every observation"))
    seed: int | None = attrs.field(
        default=None, metadata=unset("job.seed", same_as="job.seed", metadata=NOT_IDENTITY)
    )  # another random stream, the same problem
    pruning_rounds: int = attrs.field(default=2, validator=at_least(1))
    num_exploration: int = attrs.field(default=2, validator=at_least(0))
    eta_knob: float | None = attrs.field(
        default=None, validator=optional(between(0, 1)), metadata=unset("job.eta_knob", same_as="job.eta_knob")
    )
    beta_knob: float | None = attrs.field(
        default=None, validator=optional(at_least(1)), metadata=unset("job.beta_knob", same_as="job.beta_knob")
    )
    tolerance: float = attrs.field(default=0.3, validator=at_least(0.0))
    cv0: float = attrs.field(default=0.1, validator=at_least(0.0))
    patience: int = attrs.field(default=2, validator=at_least(1))
    use_predictions: bool = True
    min_improvement_prob: float = attrs.field(default=0.2, validator=between(0, 1))
    sigma_w: float = attrs.field(default=0.3, validator=at_least(0.01))
    sigma_slope: float = attrs.field(default=0.3, validator=at_least(0.0))
    #: Stop an exploratory try this many noise sds above the best known cost (inf: the paper's bound).
    explore_bound_sds: float = attrs.field(default=math.inf, validator=at_least(0.0))
    #: Guided exploration: stop an exploratory try where a restart at the best size is expected to be cheaper.
    explore_stop: bool = True
    #: Prior chance that a run never reaches the target (for explore_stop).
    fail_prob: float = attrs.field(default=0.05, validator=between(0, 1))
    #: explore_stop: an exploratory try runs at least until it costs the best size's expected cost plus this many noise sds.
    stop_margin_sds: float = attrs.field(default=0.0, validator=at_least(0.0))
    #: Guided exploration: stopped exploratory tries may waste at most this fraction of horizon x the best cost.
    explore_budget: float = attrs.field(default=0.05, validator=at_least(0.0))
    #: Recurrences the job is expected to have, for explore_budget (0: 2 x batch sizes x power limits).
    horizon: int = attrs.field(default=0, validator=at_least(0), metadata=unset("2 x batch sizes x power limits"))


@attrs.define
class JitOptions:
    """``[power] plugin = "jit"``.

    During the first epoch at a batch size, each power limit (highest first,
    ``step_w`` apart, or the device's own list) runs ``warmup_iters`` then
    ``measure_iters`` iterations; the limit with the lowest cost per
    iteration is held from then on and remembered per batch size. Windows
    longer than an epoch are scaled down to fit. ``spread_over_epoch`` splits
    the whole first epoch evenly among the limits instead (the accounting of
    the paper's trace-driven simulator: that epoch costs the mean over limits).
    ``eta_knob`` left out: the job's. ``wait_iters``: iterations each profiling
    epoch runs before its first window (upstream's ``wait_steps``). ``select``:
    which profiled limit to hold: ``cost`` (the job's cost metric), ``energy``,
    ``time`` (the lowest per iteration), or ``max-slowdown`` (the lowest limit
    whose time per iteration is within ``max_slowdown`` x the highest limit's).
    ``thermally_stable``: each limit's warm-up goes on past ``warmup_iters`` until
    the GPUs' power and temperature have settled (:class:`zeus_core.profiling.Settling`:
    the last ``settle_readings`` readings, one per iteration, within
    ``settle_temperature_c`` degrees and ``settle_power_rel`` of their mean), for at
    most ``max_warmup_iters``, so no limit is measured colder than it runs. On by
    default: where power and temperature are constant (every simulated driver unless
    its temperature quirk is on) it adds no iteration and changes no figure, and a
    window planned with no warm-up is measured as planned.
    """

    step_w: float = attrs.field(default=25.0, validator=at_least(1.0))
    warmup_iters: int = attrs.field(default=10, validator=at_least(0))
    measure_iters: int = attrs.field(default=40, validator=at_least(1))
    spread_over_epoch: bool = False
    eta_knob: float | None = attrs.field(
        default=None, validator=optional(between(0, 1)), metadata=unset("job.eta_knob", same_as="job.eta_knob")
    )
    wait_iters: int = attrs.field(default=0, validator=at_least(0))
    select: str = attrs.field(default="cost", validator=one_of(*SELECTS))
    max_slowdown: float = attrs.field(default=1.1, validator=at_least(1.0))
    thermally_stable: bool = True
    max_warmup_iters: int = attrs.field(default=1000, validator=at_least(1))
    settle_readings: int = attrs.field(default=5, validator=at_least(2))
    settle_temperature_c: float = attrs.field(default=1.0, validator=at_least(0.01))
    settle_power_rel: float = attrs.field(default=0.05, validator=at_least(0.0001))


@attrs.define
class CarbonAwareOptions(JitOptions):
    """``[power] plugin = "carbon-aware"``: the ``jit`` options (how the profile is made, once per
    batch size, and ``select``, whose choice sets the time budget), and how the budget is spent.

    Once the profile exists, the limit changes at every period of the job's ``[grid]
    carbon_intensity``: the run keeps the time the carbon-blind JIT would take (with
    ``select = "max-slowdown"``: ``max_slowdown`` x the time at the highest limit) and
    spends it where the grid is dirtiest. ``window_h``: hours of the signal's recent past
    that set how (the multiplier of ``carbon_plan.py``); ``horizon_h``: hours over which
    a time debt is repaid.
    """

    window_h: float = attrs.field(default=24.0, validator=at_least(1.0))
    horizon_h: float = attrs.field(default=6.0, validator=at_least(0.25))
