"""From a profile to the whole iteration time-energy frontier of frequency plans.

``plan_frontier`` builds the pipeline DAG, one energy model per (stage,
instruction), solves the time-cost tradeoff for every integer iteration time,
maps each planned duration to the slowest clock that meets it, and replays every
plan on the measured profile. Plans are listed fastest first.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from pathlib import Path

import attrs
import numpy as np

from zeus_core import pareto_frontier

from zeus_plugins_perseus.background import Background
from zeus_plugins_perseus.clock_options import fastest_frequencies
from zeus_plugins_perseus.costmodel import OpSpec, build_spec
from zeus_plugins_perseus.dag_times import iteration_time
from zeus_plugins_perseus.emulator import chunks, emulate
from zeus_plugins_perseus.exact import ExactPlanner
from zeus_plugins_perseus.profile import InstructionProfile
from zeus_plugins_perseus.reclaim import reclaim_slack
from zeus_plugins_perseus.schedule import BACKWARD, FORWARD, PipelineDAG, build_dag
from zeus_plugins_perseus.tradeoff import solve_frontier


@attrs.frozen
class EmittedPlans:
    """Every plan the published solver emitted, fastest first (for comparison only).

    Planned numbers are the fitted model's; emulated ones replay the clocks on the
    measured profile. Many of these plans are beaten on both time and energy, so
    none of them is listed or chosen: :class:`PlanSet` holds the Pareto-optimal ones.
    """

    time_units: np.ndarray
    planned_energy_j: np.ndarray
    emulated_time_s: np.ndarray
    emulated_energy_j: np.ndarray
    listed_as: np.ndarray  # index of the same plan in the PlanSet, -1 where it is not Pareto-optimal


@attrs.frozen
class PlanSet:
    """The Pareto-optimal plans of a frontier (by emulated time and energy), fastest first.

    Only plans that no other plan beats on both emulated time and energy are
    kept, whatever the model: a listed plan is one worth running. ``emitted``
    keeps the published solver's whole output (``model = "exponential"``) so it
    can still be compared point by point with lowtime and the paper.
    """

    dag: PipelineDAG
    specs: dict[tuple[int, str], OpSpec]
    model: str
    unit_time_s: float
    blocking_power_w: float
    time_units: np.ndarray  # planned iteration time, in units (fractional for the exact fast-end plan)
    planned_energy_j: np.ndarray
    frequencies: np.ndarray  # [plan, op] MHz
    emulated_time_s: np.ndarray
    emulated_energy_j: np.ndarray
    max_freq_time_s: float  # every instruction at the profile's highest clock
    max_freq_energy_j: float
    max_frequencies: np.ndarray  # [op]
    solve_seconds: float
    phases: int

    exact_fastest: bool = False  # real-time plans (all-max time, fastest time, the rounding gap) are included
    #: the limits the real-time plans were planned for, the zero-slowdown one first
    real_time_limits_s: np.ndarray = attrs.field(factory=lambda: np.empty(0))
    emitted: EmittedPlans | None = None

    @property
    def planned_time_s(self) -> np.ndarray:
        return self.time_units * self.unit_time_s

    def __len__(self) -> int:
        return len(self.time_units)

    @property
    def fastest(self) -> int:
        """Index of the plan of least emulated time (the first: plans are listed fastest first)."""
        return int(np.argmin(self.emulated_time_s))

    @property
    def least_energy(self) -> int:
        """Index of the plan of least emulated energy (the last listed)."""
        return int(np.argmin(self.emulated_energy_j))

    def choose(self, deadline_s: float | None = None, max_slowdown: float | None = None) -> int:
        """Index of the plan of least emulated energy whose emulated time meets the limit.

        ``deadline_s`` is an absolute iteration time; ``max_slowdown`` a factor
        of the all-max-frequency iteration time (1.0 = no slowdown, the default;
        1.05 = up to 5% slower). When nothing meets the limit, the fastest plan
        is returned (``meets`` tells).
        """
        if deadline_s is not None and max_slowdown is not None:
            raise ValueError("give deadline or max_slowdown, not both")
        limit = self.limit_s(deadline_s, max_slowdown)
        ok = np.flatnonzero(self.emulated_time_s <= limit * (1 + 1e-12))
        if ok.size == 0:
            return self.fastest
        return int(ok[np.argmin(self.emulated_energy_j[ok])])

    def limit_s(self, deadline_s: float | None = None, max_slowdown: float | None = None) -> float:
        if deadline_s is not None:
            return float(deadline_s)
        return self.max_freq_time_s * (1.0 if max_slowdown is None else float(max_slowdown))

    def meets(self, k: int, deadline_s: float | None = None, max_slowdown: float | None = None) -> bool:
        return bool(self.emulated_time_s[k] <= self.limit_s(deadline_s, max_slowdown) * (1 + 1e-12))

    def plan_json(self, k: int, stages: bool = True) -> dict:
        """One plan as JSON: per stage, the ordered instruction names and clocks (``stages=False``: the rest)."""
        head = {
            "plan": k,
            "schedule": self.dag.schedule,
            "stages_count": self.dag.stages,
            "microbatches": self.dag.microbatches,
            "model": self.model,
            "unit_time_s": self.unit_time_s,
            "blocking_power_w": self.blocking_power_w,
            "iteration_time_s": float(self.planned_time_s[k]),
            "energy_j": float(self.planned_energy_j[k]),
            "emulated_time_s": float(self.emulated_time_s[k]),
            "emulated_energy_j": float(self.emulated_energy_j[k]),
        }
        if not stages:
            return head
        per_stage = []
        for s in range(self.dag.stages):
            idx = self.dag.stage_ops(s)
            per_stage.append(
                {
                    "stage": s,
                    "instructions": [self.dag.ops[i].instruction for i in idx],
                    "microbatches": [self.dag.ops[i].microbatch for i in idx],
                    "frequencies": [int(f) for f in self.frequencies[k, idx]],
                }
            )
        return {**head, "stages": per_stage}

    def write_plan(self, k: int, path: Path) -> Path:
        path.write_text(plan_text(self.plan_json(k)))
        return path

    def write_plans(self, folder: Path, plans: range | None = None) -> None:
        """Every plan (or those in ``plans``) as ``folder/NNNNN.json`` (the same text as :meth:`write_plan`).

        What does not change from plan to plan (each stage's instructions and
        microbatches) is encoded once, the clocks of each block of plans are put
        in stage order with one gather, and each file is written with one
        ``os.write``: at 16 x 64 there are ~1,500 files of 16 stages, and the
        text-file machinery per file and a JSON encoder call per stage cost
        more than the text itself.
        """
        idx = [self.dag.stage_ops(s) for s in range(self.dag.stages)]
        order = np.array([i for ix in idx for i in ix], dtype=np.int64)
        bounds = np.cumsum([0] + [len(ix) for ix in idx]).tolist()
        prefixes = [f'{{"stage": {json.dumps(s)}, "instructions": {json.dumps([self.dag.ops[i].instruction for i in ix])}, '
                    f'"microbatches": {json.dumps([self.dag.ops[i].microbatch for i in ix])}, "frequencies": ['
                    for s, ix in enumerate(idx)]
        spans = list(zip(prefixes, bounds[:-1], bounds[1:]))
        plans = range(len(self)) if plans is None else plans
        for part in chunks(len(plans)):
            rows = slice(plans.start + part.start, plans.start + part.stop)
            block = self.frequencies[rows][:, order].tolist()  # Python ints: str() is what json writes
            for k, clocks in zip(range(rows.start, rows.stop), block):
                # ", ".join of the ints is json.dumps of the list, without an encoder call per stage
                lines = [f"{prefix}{', '.join(map(str, clocks[a:b]))}]}}" for prefix, a, b in spans]
                _write_ascii(Path(folder) / f"{k:05d}.json", _framed(self.plan_json(k, stages=False), lines))


def _write_ascii(path: Path, text: str) -> None:
    """``path.write_text(text)`` for JSON text (ASCII), without a text-file object per file.

    An existing file is overwritten in place and then cut to length rather than
    truncated first: truncating frees every block of the old plan, and on a
    file system that discards freed blocks (ext4 ``discard``) rewriting the
    plans of an earlier run cost ten times more than writing them. The file
    ends up holding exactly ``text`` either way.
    """
    data = text.encode("ascii")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def plan_text(plan: dict) -> str:
    """A plan as JSON, one key per line and one stage per line.

    Readable, and written by the C encoder (``indent`` would make json use its
    pure-Python one, which would dominate writing the hundreds of plans of a frontier).
    """
    head = {k: v for k, v in plan.items() if k != "stages"}
    return _framed(head, [json.dumps(s) for s in plan["stages"]])


def _framed(head: dict, stage_lines: list[str]) -> str:
    items = [f" {json.dumps(k)}: {json.dumps(v)}" for k, v in head.items()]
    items.append(' "stages": [\n' + ",\n".join(f"  {line}" for line in stage_lines) + "\n ]")
    return "{\n" + ",\n".join(items) + "\n}\n"


def build_specs(
    profile: InstructionProfile, stages: int, model: str, unit_time_s: float, blocking_power_w: float
) -> dict[tuple[int, str], OpSpec]:
    profile.check_stages(stages, (FORWARD, BACKWARD))
    return {
        (s, inst): build_spec(profile.get(s, inst), model, unit_time_s, blocking_power_w)
        for s in range(stages)
        for inst in (FORWARD, BACKWARD)
    }


def _solve(dag: PipelineDAG, specs: dict, unit_time_s: float, blocking_power_w: float, pareto_only: bool):
    """(time units, planned energy, clocks[plan, op], max-flow phases) of the solver's plans, fastest first."""
    keys = list(specs)
    key_index = {k: j for j, k in enumerate(keys)}
    spec_of_op = np.array([key_index[(op.stage, op.instruction)] for op in dag.ops])
    fr = solve_frontier(
        dag.n_ops,
        dag.edges,
        spec_of_op,
        [specs[k].lo for k in keys],
        [specs[k].hi for k in keys],
        [specs[k].costs for k in keys],
    )
    t_units = fr.times[::-1]
    durations = fr.durations[::-1]
    energy = fr.costs[::-1] + dag.stages * t_units * unit_time_s * blocking_power_w
    if pareto_only:
        keep = slice(0, int(np.argmin(energy)) + 1)
    else:
        keep = slice(0, len(t_units) - 1)  # the all-slowest starting point is not a published plan
    t_units, durations, energy = t_units[keep], durations[keep], energy[keep]
    freqs = np.empty(durations.shape, dtype=np.int64)
    for j, k in enumerate(keys):
        cols = spec_of_op == j
        freqs[:, cols] = specs[k].frequencies_for(durations[:, cols])
    return t_units.astype(float), energy, freqs, fr.phases


#: below this many instructions, plan_frontier plans everything in its own process unless asked otherwise
PARALLEL_MIN_OPS = 384


def real_time_limits(dag: PipelineDAG, profile: InstructionProfile, specs: dict[tuple[int, str], OpSpec],
                     blocking_power_w: float, unit_time_s: float, max_gap_plans: int) -> list[float]:
    """The limits of the real-time plans, the zero-slowdown one first.

    The all-max-clock iteration time; when a lower clock is faster somewhere
    (noisy profiles), the fastest time the measured options allow; and one per
    unit across the gap that rounding up leaves below the fastest quantised
    plan, whose planned time (every instruction at its fastest quantum) bounds
    it: at most ``max_gap_plans``, evenly spaced beyond that.
    """
    fmax = np.array([int(profile.get(op.stage, op.instruction).frequency.max()) for op in dag.ops])
    limits = [float(emulate(dag, profile, fmax[None, :], blocking_power_w)[0][0])]
    fastest = emulate(dag, profile, fastest_frequencies(dag, profile)[None, :], blocking_power_w)[0][0]
    if fastest < limits[0] * (1 - 1e-9):
        limits.append(float(fastest))
    lo = np.array([specs[(op.stage, op.instruction)].lo for op in dag.ops], dtype=np.int64)
    quantised_fastest = float(iteration_time(dag.levels, lo)) * unit_time_s
    gap = np.arange(min(limits) + unit_time_s, quantised_fastest, unit_time_s)
    if len(gap) > max_gap_plans:
        gap = np.linspace(gap[0], gap[-1], max_gap_plans)
    return limits + [float(x) for x in gap]


def real_time_plans(planner: ExactPlanner, limits: list[float], check: np.ndarray | None = None) -> np.ndarray:
    """Clocks ``[plan, op]`` of the real-time plans (:meth:`ExactPlanner.plans`), the first checked: the
    zero-slowdown plan is also planned from a cold HiGHS LP (``check``, computed here if not given) and the
    better of the two is kept, since no rule guarantees the canonical one wins."""
    plans = planner.plans(limits)
    return keep_better(planner, plans, limits[0], planner.highs_plan(limits[0]) if check is None else check)


def keep_better(planner: ExactPlanner, plans: np.ndarray, limit: float, check: np.ndarray) -> np.ndarray:
    """``plans`` with its first row replaced by ``check`` where that meets ``limit`` with less emulated energy."""
    (_, t1), (e0, e1) = emulate(planner.dag, planner.profile, np.vstack([plans[0], check]), planner.blocking_w)
    if t1 <= limit and e1 < e0:
        plans = plans.copy()
        plans[0] = check
    return plans


def claim(path: Path) -> bool:
    """True for the first process to ask (the file did not exist), False for every later one."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return True
    except FileExistsError:
        return False


def _claimed_check(planner: ExactPlanner, limit: float, claim_path: Path) -> np.ndarray | None:
    """The zero-slowdown check, in the worker, unless the planning process claimed it first."""
    return planner.highs_plan(limit) if claim(claim_path) else None


def plan_frontier(
    profile: InstructionProfile,
    stages: int,
    microbatches: int,
    schedule: str = "1f1b",
    unit_time_s: float = 0.001,
    blocking_power_w: float = 0.0,
    model: str = "measured",
    pareto_only: bool | None = None,
    exact_fastest: bool | None = None,
    reclaim: bool | None = None,
    max_gap_plans: int = 32,
    workers: int | None = None,
    background: Background | None = None,
) -> PlanSet:
    """Solve and emulate the frontier; only Pareto-optimal plans are listed, fastest first.

    ``pareto_only`` (default: True for ``measured``, False for ``exponential``)
    stops the solver's plans at its least planned energy before they are
    emulated (slower plans cost more by the model's own account). Whatever it
    is, the plans listed are the emulated Pareto frontier of everything
    planned; with the exponential model the solver's whole output is kept in
    ``PlanSet.emitted`` (one plan per unit from just below the all-slowest
    time, as the published solver emits them) for comparison.

    ``reclaim`` (default: True for ``measured``) spends the float each
    quantised plan leaves on the real timeline (:mod:`~zeus_plugins_perseus.reclaim`):
    same or shorter emulated time, less energy.

    ``exact_fastest`` (default: True for ``measured``) adds plans solved in real
    time (:mod:`~zeus_plugins_perseus.exact`): one at exactly the all-max-clock
    iteration time (the zero-slowdown plan), one at the fastest time the
    measured clocks allow when that is shorter (a noisy profile where a lower
    clock is faster), and up to ``max_gap_plans`` evenly over the gap between
    those and the fastest quantised plan (one per unit when it fits), which
    rounding times up leaves empty. They come from one parametric min-cost
    flow by the canonical rule of :mod:`~zeus_plugins_perseus.exact`; the
    zero-slowdown plan is also planned from a cold HiGHS LP and the better of
    the two is kept. The real-time plans do not depend on the quantised ones,
    so they are planned in ``background`` (or a
    :class:`~zeus_plugins_perseus.background.Background` of ``workers``: None
    uses a second CPU where there is one, 1 keeps everything in this process)
    while this process solves the quantised frontier (pipelines of fewer
    than :data:`PARALLEL_MIN_OPS` instructions stay here unless ``workers``
    asks); the plans are the same either way.
    """
    if not unit_time_s > 0:
        raise ValueError(f"unit_time_s must be > 0, got {unit_time_s}")
    if blocking_power_w < 0:
        raise ValueError(f"blocking_power_w must be >= 0, got {blocking_power_w}")
    started = time.perf_counter()
    dag = build_dag(schedule, stages, microbatches)
    specs = build_specs(profile, stages, model, unit_time_s, blocking_power_w)
    if pareto_only is None:
        pareto_only = model == "measured"
    if reclaim is None:
        reclaim = model == "measured"
    if exact_fastest is None:
        exact_fastest = model == "measured"
    fmax = np.array([int(profile.get(op.stage, op.instruction).frequency.max()) for op in dag.ops])
    mt, me = emulate(dag, profile, fmax[None, :], blocking_power_w)
    limits: list[float] = []
    with contextlib.ExitStack() as stack:
        if background is None:  # a worker costs a Python start-up: small pipelines plan faster without
            small = workers is None and dag.n_ops < PARALLEL_MIN_OPS
            background = stack.enter_context(Background(1 if small else workers))
        bg = background
        check = None
        if exact_fastest:
            limits = real_time_limits(dag, profile, specs, blocking_power_w, unit_time_s, max_gap_plans)
            planner = ExactPlanner(dag, profile, blocking_power_w)
            # independent of the quantised plans: on the second CPU where there is one; the zero-slowdown
            # check goes to whichever process is free first
            real_time = bg.submit(planner.plans, limits)
            if bg.parallel:
                claim_path = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="zeus-perseus-"))) / "check"
                check = bg.submit(_claimed_check, planner, limits[0], claim_path)
        t_units, energy, freqs, phases = _solve(dag, specs, unit_time_s, blocking_power_w, pareto_only)
        n_solver = len(t_units)
        if reclaim:
            freqs = reclaim_slack(dag, profile, freqs, blocking_power_w)
        emu_t, emu_e = emulate(dag, profile, freqs, blocking_power_w)
        if exact_fastest:
            f_check = planner.highs_plan(limits[0]) if check is None or claim(claim_path) else check.result()
            f_exact = keep_better(planner, real_time.result(), limits[0], f_check)
            et, ee = emulate(dag, profile, f_exact, blocking_power_w)
            t_units = np.concatenate([np.array(limits) / unit_time_s, t_units])
            energy = np.concatenate([ee, energy])
            freqs = np.vstack([f_exact, freqs])
            emu_t = np.concatenate([et, emu_t])
            emu_e = np.concatenate([ee, emu_e])
    # The emulated frontier, fastest first: a plan stays only if no faster-or-equal
    # plan uses at most its energy.
    keep = pareto_frontier(emu_t, emu_e)
    keep = keep[np.argsort(emu_t[keep], kind="stable")]
    emitted = None
    if model == "exponential":
        n_exact = len(emu_t) - n_solver
        listed_as = np.full(len(emu_t), -1, dtype=np.int64)
        listed_as[keep] = np.arange(len(keep))
        own = slice(n_exact, None)  # the solver's plans (after any real-time ones)
        emitted = EmittedPlans(time_units=t_units[own], planned_energy_j=energy[own], emulated_time_s=emu_t[own],
                               emulated_energy_j=emu_e[own], listed_as=listed_as[own])
    t_units, energy, freqs, emu_t, emu_e = t_units[keep], energy[keep], freqs[keep], emu_t[keep], emu_e[keep]
    solve_seconds = time.perf_counter() - started
    return PlanSet(
        dag=dag,
        specs=specs,
        model=model,
        unit_time_s=unit_time_s,
        blocking_power_w=blocking_power_w,
        time_units=t_units,
        planned_energy_j=energy,
        frequencies=freqs,
        emulated_time_s=emu_t,
        emulated_energy_j=emu_e,
        max_freq_time_s=float(mt[0]),
        max_freq_energy_j=float(me[0]),
        max_frequencies=fmax,
        solve_seconds=solve_seconds,
        phases=phases,
        exact_fastest=bool(exact_fastest),
        real_time_limits_s=np.asarray(limits if exact_fastest else [], dtype=float),
        emitted=emitted,
    )
