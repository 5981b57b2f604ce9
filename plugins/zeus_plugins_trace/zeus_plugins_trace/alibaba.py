"""``[profiler] plugin = "alibaba"``: ``zeus run`` replays a group file under each in-flight rule.

A planner part: it runs once per ``zeus run``, before (and instead of) any
recurrence, and reports like the single-job trace workload does: totals against
the default and the oracle, per group and over all groups, a table of every try,
and a plot. The batch-size policy is the job's own ``[batch_size]`` part, built
through its registration once per group (a fresh policy per recurring job, seeded
by the group), so any registered policy replays; the GPU is the ``[device]``
trace device's.

With a ``[grid]``, every try is charged against its signals over its own time in the
cluster (``start_time_s`` to ``end_time_s`` of ``tries.csv``, its energy spread evenly
over it; the core's integration rule, :func:`zeus_core.grid.replay_columns`), the
cluster's clock placed so that the first submission is at ``[grid] start``; the
baselines are charged over each job's time at their expected energy. ``tries.csv``,
``group_results.csv``, the summary and the report then carry ``carbon_g`` and
``cost_<currency>`` next to the energy.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from zeus_core import BuildContext, PartMismatch, TryRecord, savings, write_atomic
from zeus_core.comparison import Row as ComparisonRow
from zeus_core.comparison import comparison_table
from zeus_core.files import atomic_path
from zeus_core.grid import job_totals, replay_columns
from zeus_core.results import GRID_KEY
from zeus_core.units import energy as human_energy
from zeus_plugins_trace.device import TraceDevice
from zeus_plugins_trace.groups import Group, groups_csv, read_groups
from zeus_plugins_trace.options import AlibabaReplayOptions, TraceDeviceOptions
from zeus_plugins_trace.replay import GroupResult, replay_group
from zeus_plugins_trace.simulate import SimulationError, grid_keys, replay_start
from zeus_plugins_trace.traces import TraceError, WorkloadTrace
from zeus_plugins_trace.tracesets import load_workload_traces

if TYPE_CHECKING:
    from rich.console import Console

    from zeus_core import JobSummary
    from zeus_core.grid import Grid


def load_groups(options: AlibabaReplayOptions, job_dir: Path) -> tuple[list[Group], dict[str, dict[str, str]], str]:
    """(groups, extra columns per group, where they came from)."""
    datasets = [w.dataset for w in options.workloads]
    if options.groups == "synthetic":
        from zeus_plugins_trace.groupsynth import synthesize

        groups, patterns = synthesize(options.synthetic_groups, options.groups_seed, tuple(datasets))
        return groups, {g: {"pattern": p} for g, p in patterns.items()}, f"synthetic groups (seed {options.groups_seed})"
    path = Path(options.groups).expanduser()
    path = path if path.is_absolute() else job_dir / path
    return read_groups(path, datasets), {}, str(path)


class AlibabaReplay:
    """Replays every group of a group file under each in-flight rule (see :mod:`zeus_plugins_trace.replay`)."""

    def __init__(self, options: AlibabaReplayOptions, context: BuildContext) -> None:
        self.options = options
        self.context = context
        spec = context.spec
        device = context.parts.get("device")
        if not isinstance(device, TraceDevice):
            raise ValueError('the alibaba replay runs on the trace device: add [device] plugin = "trace" (its gpu is replayed)')
        if spec is None or "batch_size" not in spec.parts:
            raise ValueError('the alibaba replay needs the batch-size policy to replay: add a [batch_size] table (e.g. plugin = "mab")')
        self.gpu = device.gpu
        self.results: list[GroupResult] = []
        #: the in-flight rules whose replay finished (every group), in the order of ``inflight``
        self.rules: list[str] = []
        self.groups: list[Group] = []
        self.extra: dict[str, dict[str, str]] = {}
        self.source = ""
        self.synthetic_traces = options.traces == "synthetic"
        #: The job's grid (None without ``[grid]``), and what the replay reports of it next to the energy.
        self.grid: Grid | None = None
        self.grid_keys: list[str] = []
        #: With a grid: each try's columns (as ``self.results[i].tries[j]``), and each group's baselines'.
        self.try_grid: list[list[dict[str, float]]] = []
        self.baseline_grid: dict[str, dict[str, dict[str, float]]] = {}

    def make_policy(self, wt: WorkloadTrace) -> Callable[[int], Any]:
        """A factory of fresh policies for groups replayed on ``wt``, seeded per group (``job.seed``);
        built as the runner builds a part (the engine's assembly), beside a trace device that can
        predict epochs."""
        from zeus_core.engine import Assembly

        ctx = self.context
        spec = ctx.spec
        assert spec is not None  # a profiler is built for a job
        device = TraceDevice(TraceDeviceOptions(gpu=self.gpu))
        device.attach(wt)

        def make(seed: int) -> Any:
            seeded = attrs.evolve(spec, job=attrs.evolve(spec.job, seed=seed))
            return Assembly(seeded, ctx.registry, console=ctx.console, parts={"device": device}).build_part("batch_size")

        return make

    def plan(self, ctx: BuildContext) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        try:
            traces = load_workload_traces(self.options, self.gpu, ctx.job_dir)
            self.groups, self.extra, self.source = load_groups(self.options, ctx.job_dir)
        except TraceError as e:
            raise ValueError(str(e)) from None
        assert ctx.spec is not None  # a profiler is built for a job
        job = ctx.spec.job
        settings = {w.dataset: w for w in self.options.workloads}
        makers = {d: self.make_policy(wt) for d, wt in traces.items()}
        columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        failed: list[str] = []
        with Progress(*columns, console=ctx.console, transient=True) as progress:
            for rule in self.options.inflight:
                task = progress.add_task(f"groups, in-flight rule {rule}", total=len(self.groups))
                done: list[GroupResult] = []
                try:
                    for g in self.groups:
                        w = settings[g.dataset]
                        gjob = attrs.evolve(job, target_metric=w.target_metric, max_epochs=w.max_epochs)
                        done.append(replay_group(g, traces[g.dataset], makers[g.dataset], gjob, w.default_batch_size, rule))
                        progress.advance(task)
                except SimulationError as e:  # this rule stops; the others still replay, and what finished is kept
                    failed.append(str(e))
                    continue
                self.results += done
                self.rules.append(rule)
        if failed:
            kept = (
                f"; the results of the rule{'s' if len(self.rules) > 1 else ''} that finished "
                f"({', '.join(repr(r) for r in self.rules)}) are reported and written (--output)"
                if self.rules
                else ""
            )
            error = PartMismatch("[profiler] plugin 'alibaba': " + "; ".join(failed) + kept)
            error.partial = bool(self.rules)
            self._charge(ctx.grid)
            raise error
        self._charge(ctx.grid)

    def _charge(self, grid: Grid | None) -> None:
        """Charge every try, and both baselines, against ``grid`` (nothing without one)."""
        if grid is None or not self.results:
            return
        origin = replay_start(grid) - min(j.start for g in self.groups for j in g.jobs)
        tries = [(r, t) for r in self.results for t in r.tries]
        cols = replay_columns(
            grid,
            [origin + t.start for _, t in tries],
            [origin + t.end for _, t in tries],
            [t.energy_j for _, t in tries],
            [t.energy_j for _, t in tries],
            name=lambda k: (
                f"rule {tries[k][0].rule}, group {tries[k][0].group}, job {tries[k][1].record.recurrence}, "
                f"try {tries[k][1].record.try_index}"
            ),
        )
        values = {c: v.tolist() for c, v in cols.items()}
        flat = [{c: v[k] for c, v in values.items()} for k in range(len(tries))]
        self.try_grid, at = [], 0
        for r in self.results:
            self.try_grid.append(flat[at : at + len(r.tries)])
            at += len(r.tries)
        # The baselines over each job's time, at their expected energy (the same for every rule: the first's groups).
        first = [r for r in self.results if r.rule == self.results[0].rule]
        by_group = {g.id: g for g in self.groups}
        jobs = [(n, j) for n, r in enumerate(first) for j in by_group[r.group].jobs]
        self.baseline_grid = {r.group: {} for r in first}
        for which in ("default", "oracle"):
            per_job = [(first[n].default if which == "default" else first[n].oracle).energy_j * j.runtime_ratio for n, j in jobs]
            energy = [r.baseline_totals(which)["energy_j"] for r in first]

            def label(n: int, which: str = which) -> str:
                return f"group {first[n].group} ({which}, over its jobs' times)"

            got = replay_columns(
                grid,
                [origin + j.start for _, j in jobs],
                [origin + j.end for _, j in jobs],
                per_job,
                energy,
                [n for n, _ in jobs],
                name=label,
            )
            for n, r in enumerate(first):
                self.baseline_grid[r.group][which] = {c: float(v[n]) for c, v in got.items()}
        self.grid = grid
        self.grid_keys = grid_keys(grid)

    # -- results --

    def totals(self) -> dict[str, dict[str, float]]:
        """Totals over all groups: each rule's, and the default's and oracle's over the same jobs
        (with a grid, also ``carbon_g`` and ``cost_<currency>``: :meth:`grid_totals`)."""
        out: dict[str, dict[str, float]] = {}
        for r in self.results:
            for name, t in ((r.rule, r.totals()), ("default", r.baseline_totals("default")), ("oracle", r.baseline_totals("oracle"))):
                if name in ("default", "oracle") and r.rule != self.rules[0]:
                    continue  # the baselines do not depend on the rule: count each group once
                acc = out.setdefault(name, {"energy_j": 0.0, "time_s": 0.0, "cost": 0.0})
                for k, v in t.items():
                    acc[k] += v
        for name, acc in out.items():
            acc.update(self.grid_totals(self.charged(name), acc["energy_j"]))
        return out

    def grid_totals(self, records: list[TryRecord], energy_j: float) -> dict[str, float]:
        """The grid columns of ``energy_j`` over ``records`` as ``zeus run`` totals a job's
        (:func:`zeus_core.grid.job_totals`: exact with a constant), those the replay reports."""
        if self.grid is None or not self.grid_keys:
            return {}
        totals = job_totals(records, energy_j, self.grid.currency)
        return {k: totals[k] for k in self.grid_keys}

    def charged(self, name: str, n: int | None = None) -> list[TryRecord]:
        """With a grid: the tries of rule ``name`` (of ``self.results[n]`` only, when given), scaled as
        they count, with their grid columns; for ``default`` and ``oracle``, one record per group."""
        if self.grid is None:
            return []
        if name in ("default", "oracle"):
            first = [r for r in self.results if r.rule == self.rules[0]]
            return [
                TryRecord(
                    0, 0, 0, None, 0, b["time_s"], b["energy_j"], b["cost"], True, extra={GRID_KEY: self.baseline_grid[r.group][name]}
                )
                for r in first
                for b in (r.baseline_totals(name),)
            ]
        out = []
        for m, r in enumerate(self.results):
            if r.rule != name or (n is not None and m != n):
                continue
            for t, cols in zip(r.tries, self.try_grid[m]):
                rec = t.record
                out.append(
                    TryRecord(
                        rec.recurrence,
                        rec.try_index,
                        rec.batch_size,
                        rec.power_limit,
                        rec.epochs,
                        t.time_s,
                        t.energy_j,
                        t.cost,
                        rec.reached,
                        rec.stopped,
                        extra={GRID_KEY: cols},
                    )
                )
        return out

    def group_totals(self, n: int) -> dict[str, float]:
        """``self.results[n]``'s totals, with its grid columns."""
        t = self.results[n].totals()
        t.update(self.grid_totals(self.charged(self.results[n].rule, n), t["energy_j"]))
        return t

    def baseline_totals(self, r: GroupResult, which: str) -> dict[str, float]:
        """Group ``r``'s ``which`` baseline totals, with its grid columns."""
        t = r.baseline_totals(which)
        t.update({k: self.baseline_grid[r.group][which][k] for k in self.grid_keys})
        return t

    def summary(self, _job: JobSummary | None = None) -> dict[str, Any]:
        totals = self.totals()
        return {
            "groups": self.source,
            "synthetic_groups": self.options.groups == "synthetic",
            "traces": "synthetic" if self.synthetic_traces else self.options.traces,
            "gpu": self.gpu,
            "group_count": len(self.groups),
            "jobs": sum(len(g.jobs) for g in self.groups),
            "default": totals["default"],
            "oracle": totals["oracle"],
            "rules": {
                rule: {
                    **totals[rule],
                    "vs_default": savings(totals[rule], totals["default"]),
                    "vs_oracle": savings(totals[rule], totals["oracle"]),
                }
                for rule in self.rules
            },
        }

    def concluded(self, _job: JobSummary | None = None) -> dict[str, dict[str, float]]:
        """Each rule's totals over every group, for the closing verdict (:class:`zeus_core.parts.Concludes`)."""
        totals = self.totals()
        kind = "synthetic " if self.options.groups == "synthetic" else ""
        jobs = sum(len(g.jobs) for g in self.groups)
        return {f"rule {rule}, {len(self.groups)} {kind}groups of {jobs:,} jobs replayed": totals[rule] for rule in self.rules}

    def baselines(self, _job: JobSummary | None = None) -> dict[str, dict[str, float]]:
        """The default's and the oracle's expected totals over the same jobs (:class:`zeus_core.parts.Compares`)."""
        totals = self.totals()
        return {"default": totals["default"], "oracle": totals["oracle"]}

    def report(self, console: Console, _job: JobSummary | None = None) -> None:
        totals = self.totals()
        kind = "synthetic " if self.options.groups == "synthetic" else ""
        trace = "synthetic trace" if self.synthetic_traces else f"trace {self.options.traces}"
        how = {"paper": "policy when nothing in flight", "improved": "policy when none of its own in flight"}
        rows = [ComparisonRow(f"rule {rule}", f"{how[rule]}; others: cheapest run", totals[rule]) for rule in self.rules]
        rows += [
            ComparisonRow("default", "user's batch size, max power (expected)", totals["default"]),
            ComparisonRow("oracle", "best fixed knobs (expected)", totals["oracle"]),
        ]
        console.print(
            comparison_table(
                f"{len(self.groups)} {kind}groups, {sum(len(g.jobs) for g in self.groups)} jobs on {self.gpu} ({trace})",
                rows,
                base=totals["default"],
                reference=totals["oracle"],
            )
        )
        console.print("savings are against the default; regret is the extra cost over the oracle; per group: group_results.csv (--output)")
        for k in self.grid_keys:
            unit = "kg CO2eq" if k == "carbon_g" else (self.grid.currency if self.grid is not None else "")
            scale = 1e-3 if k == "carbon_g" else 1.0
            figures = [f"rule {rule} {totals[rule][k] * scale:,.2f}" for rule in self.rules]
            figures += [f"{b} {totals[b][k] * scale:,.2f} (expected, over its jobs' times)" for b in ("default", "oracle")]
            console.print(f"{k} ({unit}): " + ", ".join(figures), highlight=False)

    def write_outputs(self, out_dir: Path, _job: JobSummary | None = None) -> list[Path]:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        written = [
            write_atomic(out_dir / "groups.csv", groups_csv(self.groups, self.extra)),
            write_atomic(out_dir / "group_results.csv", self._group_results_csv()),
            write_atomic(out_dir / "tries.csv", self._tries_csv()),
        ]
        written.append(self._plot(out_dir / "energy_over_time.png"))
        return written

    def _group_results_csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        keys = self.grid_keys  # with a grid: carbon_g, cost_<currency>, then the baselines', after the others
        w.writerow(
            [
                "rule",
                "group",
                "dataset",
                "jobs",
                "tries",
                "policy_tries",
                "energy_j",
                "time_s",
                "cost",
                "default_energy_j",
                "default_time_s",
                "default_cost",
                "oracle_energy_j",
                "oracle_time_s",
                "oracle_cost",
                "cost_saved_vs_default",
                "regret_vs_oracle",
                *keys,
                *(f"default_{k}" for k in keys),
                *(f"oracle_{k}" for k in keys),
            ]
        )
        for n, r in enumerate(self.results):
            t, d, o = self.group_totals(n), self.baseline_totals(r, "default"), self.baseline_totals(r, "oracle")
            w.writerow(
                [
                    r.rule,
                    r.group,
                    r.dataset,
                    r.jobs,
                    len(r.tries),
                    sum(x.chooser == "policy" for x in r.tries),
                    *(
                        repr(v)
                        for v in (
                            t["energy_j"],
                            t["time_s"],
                            t["cost"],
                            d["energy_j"],
                            d["time_s"],
                            d["cost"],
                            o["energy_j"],
                            o["time_s"],
                            o["cost"],
                            savings(t, d)["cost_saved"],
                            savings(t, o)["regret"],
                            *(x[k] for x in (t, d, o) for k in keys),
                        )
                    ),
                ]
            )
        return buf.getvalue()

    def _tries_csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(
            [
                "rule",
                "group",
                "job",
                "try",
                "start_time",
                "end_time",
                "in_flight",
                "chosen_by",
                "batch_size",
                "power_limit",
                "epochs",
                "reached",
                "stopped",
                "runtime_ratio",
                "energy_j",
                "time_s",
                "cost",
                # the same quantities again under names that say their units (after the others: a contract)
                "start_time_s",
                "end_time_s",
                "power_limit_w",
                # with a grid: the try's emissions and energy cost, and the mean intensity and price they were charged at
                *(self.try_grid[0][0] if self.try_grid and self.try_grid[0] else ()),
            ]
        )
        for n, r in enumerate(self.results):
            charged = self.try_grid[n] if self.try_grid else [{}] * len(r.tries)
            order = sorted(range(len(r.tries)), key=lambda i: (r.tries[i].start, r.tries[i].record.recurrence, r.tries[i].record.try_index))
            for i in order:
                t, rec = r.tries[i], r.tries[i].record
                w.writerow(
                    [
                        r.rule,
                        r.group,
                        rec.recurrence,
                        rec.try_index,
                        repr(t.start),
                        repr(t.end),
                        t.in_flight,
                        t.chooser,
                        rec.batch_size,
                        rec.power_limit,
                        rec.epochs,
                        rec.reached,
                        rec.stopped or "",
                        repr(t.runtime_ratio),
                        repr(t.energy_j),
                        repr(t.time_s),
                        repr(t.cost),
                        repr(t.start),
                        repr(t.end),
                        rec.power_limit,
                        *(repr(v) for v in charged[i].values()),
                    ]
                )
        return buf.getvalue()

    def _plot(self, path: Path) -> Path:
        """``energy_over_time.png``: :meth:`_figure`, written to ``path``."""
        fig = self._figure()
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
        return path

    def _figure(self) -> Any:
        """Cumulative energy over the cluster's clock: each rule's tries at their end, the
        baselines' expected energy per job at the job's end. Rules that end close together would hide
        one another, so each is drawn wider and paler than the next, and the legend gives each total."""
        import numpy as np
        from matplotlib.figure import Figure  # the object API: no pyplot state, the user's backend untouched

        fig = Figure(figsize=(8, 4.5))
        ax = fig.subplots()
        t0 = min(g.jobs[0].start for g in self.groups)

        def draw(ends: list[float], energy: list[float], label: str, **style: Any) -> None:
            order = np.argsort(ends, kind="stable")
            x = (np.asarray(ends)[order] - t0) / 86400.0
            ax.step(x, np.cumsum(np.asarray(energy)[order]) / 3.6e9, where="post", label=f"{label}: {human_energy(sum(energy))}", **style)

        # the first rule widest and palest, underneath; each later one narrower on top, so all stay visible
        widths = np.linspace(4.5, 1.2, len(self.rules)) if len(self.rules) > 1 else [1.5]
        for k, rule in enumerate(self.rules):
            tries = [t for r in self.results if r.rule == rule for t in r.tries]
            style = {"lw": float(widths[k]), "alpha": 0.45 if k < len(self.rules) - 1 else 1.0, "zorder": 2 + k}
            draw([t.end for t in tries], [t.energy_j for t in tries], f"rule {rule}", **style)
        first = [r for r in self.results if r.rule == self.rules[0]]
        by_group = {g.id: g for g in self.groups}
        for which, line in (("default", {"color": "tab:red", "ls": "--"}), ("oracle", {"color": "tab:green", "ls": "--"})):
            ends, energy = [], []
            for r in first:
                b = r.default if which == "default" else r.oracle
                for j in by_group[r.group].jobs:
                    ends.append(j.end)
                    energy.append(b.energy_j * j.runtime_ratio)
            draw(ends, energy, f"{which} (expected)", **line)
        ax.set_xlabel("cluster time (days)")
        ax.set_ylabel("cumulative energy (MWh)")
        synthetic = " (synthetic groups)" if self.options.groups == "synthetic" else ""
        ax.set_title(f"{len(self.groups)} recurring groups on {self.gpu}{synthetic}")
        ax.legend(fontsize=8)
        fig.tight_layout()
        return fig
