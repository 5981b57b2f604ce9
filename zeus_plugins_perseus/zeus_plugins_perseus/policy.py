"""The ``perseus`` frequency-plan policy: a planner part of ``zeus run``."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import attrs
import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from zeus_core import write_atomic
from zeus_plugins_perseus.background import Background, planner_worker
from zeus_plugins_perseus.options import PerseusOptions
from zeus_plugins_perseus.planner import PlanSet, plan_frontier
from zeus_plugins_perseus.plots import figure_data, frontier_rows, warm_up, write_figures
from zeus_plugins_perseus.profile import read_profile

FRONTIER_COLUMNS = ("plan", "iteration_time_s", "energy_j", "emulated_time_s", "emulated_energy_j")
#: the published solver's whole output (exponential model): ``listed_as`` is the plan's row in
#: frontier.csv, empty where another plan beats it on both emulated time and energy
EMITTED_COLUMNS = ("iteration_time_s", "energy_j", "emulated_time_s", "emulated_energy_j", "listed_as")


def _csv(header, rows) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


class PerseusPolicy:
    """Every Pareto-optimal per-instruction SM-clock plan of a pipeline, and the one the job's limit picks."""

    Options = PerseusOptions

    def __init__(self, options: PerseusOptions, context: Any, background: Background | None = None) -> None:
        self.options = options
        path = context.resolve_path(options.profile)
        self.profile_path = path
        self.profile = read_profile(path)  # ProfileError is a ValueError: the core reports it with the section
        self.stages = options.stages if options.stages is not None else len(self.profile.stages)
        self.profile.check_stages(self.stages, ("forward", "backward"))
        self.plans: PlanSet | None = None
        self.chosen: int | None = None
        # a worker beside this process (the plugin's factory starts it before importing this module): it plans the
        # real-time plans while this one solves the quantised frontier, shares the rest, and writes the plan files
        # while this one draws the figures
        self._background: Background | None = background if background is not None else planner_worker()
        self._background.start()

    def plan(self, ctx: Any = None) -> None:
        o = self.options
        if self._background is None:
            self._background = planner_worker()
        self.plans = plan_frontier(
            self.profile,
            stages=self.stages,
            microbatches=o.microbatches,
            schedule=o.schedule,
            unit_time_s=o.unit_time_s,
            blocking_power_w=o.blocking_power_w,
            model=o.model,
            max_gap_plans=o.max_gap_plans,
            background=self._background,
            deadline_s=o.deadline,
            max_slowdown=o.max_slowdown,
            meanwhile=warm_up,  # this process draws the figures: matplotlib's import while the worker plans
        )
        self.chosen = self.plans.choose(deadline_s=o.deadline, max_slowdown=o.max_slowdown)

    def _close_background(self) -> None:
        if self._background is not None:
            self._background.__exit__(None, None, None)
            self._background = None

    def _require(self) -> PlanSet:
        if self.plans is None:
            raise RuntimeError("plan() has not run")
        return self.plans

    def _chosen(self) -> int:
        """The chosen plan's index (plan() sets it with the plans; call :meth:`_require` first)."""
        assert self.chosen is not None, "plan() has not run"
        return self.chosen

    def frequencies(self, plan: int | None = None) -> list[list[tuple[str, int]]]:
        """Per stage, the ordered (instruction, clock) pairs of a plan (the chosen one by default)."""
        ps = self._require()
        k = self.chosen if plan is None else plan
        return [[(ps.dag.ops[i].instruction, int(ps.frequencies[k, i])) for i in ps.dag.stage_ops(s)] for s in range(ps.dag.stages)]

    def summary(self, _summary: Any = None) -> dict:
        ps = self._require()
        k = self._chosen()
        o = self.options
        return {
            "plans": len(ps),
            "model": ps.model,
            "schedule": ps.dag.schedule,
            "stages": ps.dag.stages,
            "microbatches": ps.dag.microbatches,
            "solve_seconds": round(ps.solve_seconds, 4),
            "max_frequency": {"time_s": ps.max_freq_time_s, "energy_j": ps.max_freq_energy_j},
            "chosen": {
                "plan": k,
                "limit_s": ps.limit_s(o.deadline, o.max_slowdown),
                "meets_limit": ps.meets(k, o.deadline, o.max_slowdown),
                "iteration_time_s": float(ps.planned_time_s[k]),
                "energy_j": float(ps.planned_energy_j[k]),
                "emulated_time_s": float(ps.emulated_time_s[k]),
                "emulated_energy_j": float(ps.emulated_energy_j[k]),
                "energy_saving_vs_max": 1.0 - float(ps.emulated_energy_j[k]) / ps.max_freq_energy_j,
                # the simulated drivers the profile was measured on (empty: real hardware, or a profile that does not say)
                "profile_simulated": list(self.profile.simulated),
            },
        }

    def report(self, console: Console, _summary: Any = None) -> None:
        ps = self._require()
        s = self.summary()
        c = s["chosen"]
        table = Table(
            title=f"Perseus: {len(ps)} plans ({ps.model} model, {ps.dag.schedule}, "
            f"{ps.dag.stages} stages x {ps.dag.microbatches} microbatches) in {ps.solve_seconds:.2f} s"
        )
        for col in ("", "iteration time (s)", "energy (J)", "emulated time (s)", "emulated energy (J)"):
            table.add_column(col, justify="right" if col else "left")
        table.add_row("all max clocks", "", "", f"{ps.max_freq_time_s:.4f}", f"{ps.max_freq_energy_j:,.1f}")
        for label, k in (("fastest plan", ps.fastest), ("least-energy plan", ps.least_energy), (f"chosen plan {c['plan']}", c["plan"])):
            table.add_row(
                label,
                f"{ps.planned_time_s[k]:.4f}",
                f"{ps.planned_energy_j[k]:,.1f}",
                f"{ps.emulated_time_s[k]:.4f}",
                f"{ps.emulated_energy_j[k]:,.1f}",
            )
        console.print(table)
        verdict = "meets" if c["meets_limit"] else "[yellow]misses (no plan is fast enough; the fastest is shown)[/]"
        where = (
            f"[yellow]emulated on a profile measured on a SIMULATED GPU[/] ({escape(', '.join(self.profile.simulated))}): "
            "not a real GPU's saving"
            if self.profile.simulated
            else "emulated on the profile"
        )
        console.print(
            f"chosen plan {c['plan']} {verdict} the limit of {c['limit_s']:.4f} s and saves "
            f"{100 * c['energy_saving_vs_max']:.1f}% energy against all max clocks ({where})"
        )

    def write_outputs(self, out_dir: Path, _summary: Any = None) -> list[Path]:
        ps = self._require()
        out_dir = Path(out_dir)
        plans_dir = out_dir / "plans"
        plans_dir.mkdir(parents=True, exist_ok=True)
        # the plan files are written beside this process while it draws the figures (at 16 x 64 each takes about
        # 0.3 s); the worker gets the clocks as int32, half of what a pipe would carry otherwise
        bg = self._background if self._background is not None else Background()
        try:
            plan_files = bg.submit(attrs.evolve(ps, frequencies=ps.frequencies.astype(np.int32)).write_plans, plans_dir)
            rows = ([k, repr(t), repr(e), repr(et), repr(ee)] for k, t, e, et, ee in frontier_rows(ps))
            written = [write_atomic(out_dir / "frontier.csv", _csv(FRONTIER_COLUMNS, rows))]
            if ps.emitted is not None:
                em = ps.emitted
                rows = (
                    [repr(float(u * ps.unit_time_s)), repr(float(e)), repr(float(et)), repr(float(ee)), "" if k < 0 else int(k)]
                    for u, e, et, ee, k in zip(em.time_units, em.planned_energy_j, em.emulated_time_s, em.emulated_energy_j, em.listed_as)
                )
                written.append(write_atomic(out_dir / "published_plans.csv", _csv(EMITTED_COLUMNS, rows)))
            figure_paths = write_figures(figure_data(ps, self._chosen()), self.profile, self._chosen(), out_dir)
            plan_files.result()
            written.append(plans_dir)  # one entry for the folder: hundreds of plan files would flood the listing
            written.append(write_atomic(out_dir / "chosen_plan.json", (plans_dir / f"{self.chosen:05d}.json").read_text()))
            written += figure_paths
        except BaseException:
            bg.kill()  # a signal or an error: the worker stops writing plan files now
            raise
        finally:
            if bg is self._background:
                self._close_background()
            else:
                bg.__exit__(None, None, None)
        return written
