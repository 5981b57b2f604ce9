"""The ``hetero`` and ``even`` allocator parts (planners) built from the ``[allocation]`` table.

The solve happens when the part is built, not in ``plan``: an infeasible job
or a bad profile is bad input, and the core reports a factory's ValueError as
``[allocation] plugin 'hetero': ...`` with exit status 2 before anything runs.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from zeus_core import BuildContext, JobSummary, write_atomic
from zeus_plugins_hetero.baselines import EVEN_BEST, EVEN_MAX, HEURISTIC, all_baselines, even_split_best_limits
from zeus_plugins_hetero.model import Allocation, GpuType, Problem
from zeus_plugins_hetero.options import HeteroOptions
from zeus_plugins_hetero.profile import HeteroError, Profile
from zeus_plugins_hetero.solver import solve

OPTIMUM = "optimal"


def build_problem(options: HeteroOptions, context: BuildContext) -> Problem:
    """Load each type's profile (relative to the job file's folder) and assemble the problem."""
    eta = options.eta_knob
    if eta is None:
        eta = 0.5 if context.job is None else float(context.job.eta_knob)
    gpus = []
    for i, g in enumerate(options.gpus):
        path = context.resolve_path(g.profile)
        try:
            profile = Profile.load(path, g.profile_steps)
        except HeteroError as exc:
            raise HeteroError(f"gpus[{i}] ({g.name}): {exc}") from None
        gpus.append(GpuType(g.name, g.count, profile, g.idle_power_w))
    return Problem(
        tuple(gpus),
        global_batch=options.global_batch_size,
        granularity=options.batch_granularity,
        allreduce_time_s=options.allreduce_time_s,
        objective=options.objective,
        eta=eta,
        max_slowdown=options.max_slowdown,
    )


class AllocatorPart:
    """A planner holding one chosen allocation and the others it is compared with."""

    method = OPTIMUM

    def __init__(self, options: HeteroOptions, context: BuildContext) -> None:
        self.options = options
        self.problem = build_problem(options, context)
        self.allocation = self._choose(self.problem)
        others: dict[str, Allocation | str] = {}
        if self.method != OPTIMUM:
            others[OPTIMUM] = solve(self.problem)
        others.update({k: v for k, v in all_baselines(self.problem).items() if k != self.method})
        self.others = others

    def _choose(self, problem: Problem) -> Allocation:
        return solve(problem, method=OPTIMUM)

    # --- Planner protocol -----------------------------------------------------

    def plan(self, ctx: BuildContext) -> None:
        """Nothing left to do: the allocation was computed when the part was built."""

    def ranks(self) -> list[dict]:
        """Per GPU: ``rank``, ``gpu``, ``local_batch``, ``power_limit`` (for a data-parallel workload)."""
        return ranks(self.allocation)

    def to_json(self) -> dict:
        """The contract of ``allocation.json``, plus the inputs, the per-rank plan and the baselines."""
        p = self.problem
        out = self.allocation.to_json()
        out.update(
            {
                "objective": p.objective,
                "eta_knob": p.eta,
                "max_power_w": p.max_power_w,
                "global_batch_size": p.global_batch,
                "batch_granularity": p.granularity,
                "allreduce_time_s": p.allreduce_time_s,
                "ranks": self.ranks(),
                "baselines": {name: (a.to_json() if isinstance(a, Allocation) else {"unavailable": a}) for name, a in self.others.items()},
            }
        )
        return out

    def write_outputs(self, out_dir: Path, job: JobSummary) -> list[Path]:
        return [write_atomic(Path(out_dir) / "allocation.json", json.dumps(self.to_json(), indent=2, allow_nan=False) + "\n")]

    def summary(self, job: JobSummary) -> dict:
        a = self.allocation
        return {
            "method": a.method,
            "gpus": [{"name": c.name, "count": c.count, "local_batch": c.local_batch, "power_limit": c.power_limit} for c in a.choices],
            "iteration_time_s": a.iteration_time_s,
            "iteration_energy_j": a.iteration_energy_j,
            "cost": a.cost,
        }

    def report(self, console: Console, job: JobSummary) -> None:
        console.print(allocation_table(self.problem, self.allocation, self.others))


class EvenAllocatorPart(AllocatorPart):
    """Even split with the best power limits (the published prototype's baseline), as a part of its own."""

    method = EVEN_BEST

    def _choose(self, problem: Problem) -> Allocation:
        return even_split_best_limits(problem)


def ranks(allocation: Allocation) -> list[dict]:
    """One entry per GPU, ranks numbered type by type in the order of ``[[allocation.gpus]]``."""
    out: list[dict] = []
    for c in allocation.choices:
        for _ in range(c.count):
            out.append({"rank": len(out), "gpu": c.name, "local_batch": c.local_batch, "power_limit": c.to_json()["power_limit"]})
    return out


#: Short labels for the table; allocation.json keeps the full method names.
SHORT = {OPTIMUM: "optimal", EVEN_MAX: "even, max W", EVEN_BEST: "even, best W", HEURISTIC: "heuristic"}


def allocation_table(problem: Problem, chosen: Allocation, others: dict[str, Allocation | str]) -> Table:
    """The chosen allocation next to the others: per-type batch @ limit, step time, energy, cost.

    Baselines that do not exist for this job, or miss the min-energy time bound,
    are explained under the table rather than squeezed into a cell.
    """
    objective = "energy" if problem.objective == "min-energy" else "cost"
    title = (
        f"allocation of global batch {problem.global_batch} over {problem.n_gpus} GPUs "
        f"({problem.objective}, eta={problem.eta:g}"
        + (f", max_slowdown={problem.max_slowdown:g}" if problem.objective == "min-energy" else "")
        + ")"
    )
    table = Table(title=title, caption_justify="left")
    table.add_column("method")
    for g in problem.gpus:
        table.add_column(f"{g.name} x{g.count}", justify="right")
    table.add_column("step ms", justify="right")
    table.add_column("J/step", justify="right")
    table.add_column("cost/step", justify="right")
    table.add_column(f"{objective} ratio", justify="right")
    notes = []
    rows = [(chosen.method, chosen, True)] + [(k, v, False) for k, v in others.items()]
    best = chosen.objective_value
    for name, a, is_chosen in rows:
        label = SHORT.get(name, name) + (" *" if is_chosen else "")
        if isinstance(a, str):
            notes.append(f"{SHORT.get(name, name)}: n/a, {a}")
            table.add_row(label, *["-"] * len(problem.gpus), "-", "-", "-", "n/a")
            continue
        flag = ""
        if a.extra.get("meets_time_bound") is False:
            flag = " !"
            notes.append(f"{SHORT.get(name, name)}: ! misses the time bound (step above max_slowdown x fastest)")
        ratio = a.objective_value / best if best else float("nan")
        table.add_row(
            label,
            *[f"{c.local_batch} @ {c.power_limit:g}W" for c in a.choices],
            f"{a.iteration_time_s * 1e3:,.1f}",
            f"{a.iteration_energy_j:,.2f}",
            f"{a.cost:,.2f}",
            f"{ratio:.3f}{flag}",
        )
    heuristic_note = f"{SHORT[HEURISTIC]} = {HEURISTIC}; even = even split of the global batch"
    table.caption = "* chosen. " + heuristic_note + "".join(f"\n{n}" for n in notes)
    return table
