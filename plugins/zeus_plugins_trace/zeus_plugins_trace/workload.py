"""The ``trace`` workload: one training run replays one seeded run of the train trace.

A run at batch size ``b`` samples one of the train trace's runs of ``b`` at the
job's target metric (uniformly, from a random generator seeded with
``job.seed`` whose state is kept in the job's store, so a job split over many
``zeus run`` invocations samples what one long run would), and reaches the
target at the end of that run's ``target_epoch``, or never. Each epoch's time
and energy come from the ``trace`` device.

It also knows the whole trace, so it reports the two baselines of the paper
next to the run (:mod:`zeus_plugins_trace.baselines`), draws the plots, and
installs ``session.predict_epoch_cost`` so that early stopping judges an epoch
by its exact cost, even before the first one has run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from zeus_core import BuildContext, IterationControl, JobSummary, OffersBatchSizes, Session, zeus_cost
from zeus_core.backends import transact
from zeus_plugins_trace import report
from zeus_plugins_trace.device import TraceDevice
from zeus_plugins_trace.options import TraceWorkloadOptions
from zeus_plugins_trace.traces import TraceError
from zeus_plugins_trace.tracesets import load_workload_trace

if TYPE_CHECKING:
    from rich.console import Console

#: The users' batch sizes of the six NSDI'23 workloads (the paper's b0).
PAPER_DEFAULTS = {
    "cifar100": 1024,
    "imagenet": 256,
    "librispeech": 192,
    "movielens-1m": 1024,
    "squad": 32,
    "sentiment140": 128,
}

RNG_KEY = "workload:trace:rng"


class TraceWorkload:
    """Replays the train trace of one job on the trace device."""

    def __init__(self, options: TraceWorkloadOptions, context: BuildContext) -> None:
        self.options = options
        self.context = context
        job = context.job
        device = context.parts.get("device")
        if not isinstance(device, TraceDevice):
            raise ValueError('the trace workload runs on the trace device: set [device] plugin = "trace"')
        assert job is not None  # a workload is built for a job
        if job.target_metric is None:
            raise ValueError("set job.target_metric: the trace workload replays the epoch each run reached it")
        try:
            self.trace = load_workload_trace(options, device.gpu, job.target_metric, context.job_dir)
        except TraceError as e:
            raise ValueError(str(e)) from None
        device.attach(self.trace)
        self.device = device
        self.store = context.store
        self.job = job
        self.batch_sizes = [int(b) for b in self.trace.batch_sizes]
        b0 = options.default_batch_size or PAPER_DEFAULTS.get(options.dataset) or self.batch_sizes[len(self.batch_sizes) // 2]
        below = [b for b in self.batch_sizes if b <= b0]
        self.default_batch_size = max(below) if below else self.batch_sizes[0]

    # -- one run --

    def _sample_target_epoch(self, batch_size: int) -> float:
        """One draw from the job's path generator, whose state lives in the store."""
        paths = self.trace.paths[self.trace.index(batch_size)]

        def draw(tx: Any) -> int:
            rng = np.random.default_rng(self.job.seed)
            state = tx.get(RNG_KEY)
            if state is not None:
                rng.bit_generator.state = state
            # Same draw as the paper's simulator (pandas' sample on a Generator).
            pick = int(rng.choice(len(paths), 1, replace=False)[0]) if len(paths) else -1
            tx.set(RNG_KEY, rng.bit_generator.state)
            return pick

        # Runners sharing the job through zeus serve draw again on the latest state after a conflict.
        assert self.store is not None  # a job's workload has the job's store
        pick = transact(self.store, draw)
        return float(paths[pick]) if pick >= 0 else float("nan")

    def predict_epoch_cost(self, session: Session) -> float:
        """Exact cost of one epoch at the limit the run will hold (:class:`zeus_core.EpochCostPredictor`).

        Before the first epoch of a run whose power policy is about to profile,
        the limit it will hold is not set yet; the paper's simulator profiles
        first and then uses the chosen limit, which for the JIT is the cheapest
        one, so that is what this returns then.
        """
        eta, maxp = session.job.eta_knob, self.device.max_power_w
        policy = session.power_policy
        if session.epochs_done == 0 and isinstance(policy, IterationControl) and policy.wants_iterations(session):
            limits = self.device.supported_power_limits()
            return min(zeus_cost(e, t, eta, maxp) for t, e in (self.device.epoch_time_energy(p) for p in limits))
        t, e = self.device.epoch_time_energy()
        return zeus_cost(e, t, eta, maxp)

    def run(self, session: Session) -> None:
        self.device.use_batch_size(session.batch_size)
        target = self._sample_target_epoch(session.batch_size)
        session.extra["target_epoch"] = None if target != target else int(target)
        n = self.options.iterations_per_epoch
        for epoch in session.epochs():
            for _start, count in session.chunks(n):
                self.device.advance(count, n)
            if target == target and epoch >= target:
                session.mark_reached()

    # -- results --

    def _default_batch_size(self) -> int:
        # A batch-size policy that resolved the user's size itself (mab: the largest listed
        # size not above its `default`) says so; the comparison uses the same one.
        policy = self.context.parts.get("batch_size")
        b = policy.default_batch_size if isinstance(policy, OffersBatchSizes) else None
        return int(b) if b in self.batch_sizes else self.default_batch_size

    def comparison(self, summary: JobSummary) -> report.Comparison:
        return report.compare(self.trace, summary, self.job, self._default_batch_size())

    def summary(self, summary: JobSummary) -> dict[str, Any]:
        return self.comparison(summary).to_json()

    def report(self, console: Console, summary: JobSummary) -> None:
        if summary.records:
            report.print_table(console, self.comparison(summary))

    def baselines(self, summary: JobSummary) -> dict[str, dict[str, float]]:
        """The default's and the oracle's expected totals over the job's recurrences (the verdict's reference)."""
        return self.comparison(summary).totals() if summary.records else {}

    def write_outputs(self, out_dir: Path, summary: JobSummary) -> list[Path]:
        if not summary.records:
            return []
        return report.plots(Path(out_dir), self.trace, self.comparison(summary), summary.records, self.job.eta_knob)
