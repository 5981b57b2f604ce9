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
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def choice_limit_s(max_freq_time_s: float, deadline_s: float | None, max_slowdown: float | None) -> float:
    """The iteration time a job's plan is chosen within: ``deadline_s``, else ``max_slowdown`` (default 1.0)
    times the all-max-clock iteration time."""
    if deadline_s is not None:
        return float(deadline_s)
    return max_freq_time_s * (1.0 if max_slowdown is None else float(max_slowdown))


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
        return choice_limit_s(self.max_freq_time_s, deadline_s, max_slowdown)

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
        microbatches) is encoded once, and the clocks of a block of plans are
        turned into text all at once by :class:`ClockText`: at 16 x 64 there
        are ~1,500 files of 2,048 clocks each, and a ``str`` per clock cost
        more than everything else. Each file is one ``os.writev`` of its parts.
        """
        idx = [self.dag.stage_ops(s) for s in range(self.dag.stages)]
        order = np.array([i for ix in idx for i in ix], dtype=np.int64)
        stage_of = np.repeat(np.arange(len(idx)), [len(ix) for ix in idx])
        prefixes = [
            f'{{"stage": {json.dumps(s)}, "instructions": {json.dumps([self.dag.ops[i].instruction for i in ix])}, '
            f'"microbatches": {json.dumps([self.dag.ops[i].microbatch for i in ix])}, "frequencies": ['
            for s, ix in enumerate(idx)
        ]
        # a file: its head, then per stage (joined by ",\n  "): the stage's prefix, its clocks, "]}"
        opening = [(',\n "stages": [\n  ' if s == 0 else "]},\n  ").encode("ascii") + prefixes[s].encode("ascii") for s in range(len(idx))]
        closing = b"]}\n ]\n}\n"
        plans = range(len(self)) if plans is None else plans
        if not len(plans):
            return
        # the head: every key's line is the same in every plan but for the plan's own numbers
        fixed = {k: f" {json.dumps(k)}: {json.dumps(v)}" for k, v in self.plan_json(plans.start, stages=False).items()}
        numbers = {
            "plan": None,
            "iteration_time_s": self.planned_time_s,
            "energy_j": self.planned_energy_j,
            "emulated_time_s": self.emulated_time_s,
            "emulated_energy_j": self.emulated_energy_j,
        }
        for part in chunks(len(plans)):
            rows = range(plans.start + part.start, plans.start + part.stop)
            text = ClockText(self.frequencies[rows.start : rows.stop][:, order], stage_of)
            values = {
                key: (list(rows) if column is None else column[rows.start : rows.stop].astype(float).tolist())
                for key, column in numbers.items()
            }
            for j, k in enumerate(rows):
                head = "{\n" + ",\n".join(
                    line if key not in numbers else f" {json.dumps(key)}: {json.dumps(values[key][j])}" for key, line in fixed.items()
                )
                pieces: list[bytes | memoryview] = [head.encode("ascii")]
                for s, (a, b) in enumerate(text.spans(j)):
                    pieces += [opening[s], text.data[a:b]]
                pieces.append(closing)
                _write_pieces(Path(folder) / f"{k:05d}.json", pieces)


class ClockText:
    """The JSON text of the clocks of many plans at once: ``data`` holds, plan after plan and stage after stage,
    each stage's clocks as ``json.dumps`` writes a list's items (``1410, 1395, ...``); ``spans(j)`` gives plan
    ``j``'s (start, end) per stage in it.

    Every clock becomes a fixed-width field (its digits, with ``", "`` before it unless it opens its stage,
    padded with NUL bytes) through one lookup in a table of the clocks present; dropping the padding leaves
    the text.
    """

    def __init__(self, clocks: np.ndarray, stage_of: np.ndarray) -> None:
        clocks = np.asarray(clocks, dtype=np.int64)
        top = int(clocks.max(initial=0))
        if clocks.size and clocks.min() >= 0 and top < 1 << 20:  # a table over 0..top: no sort
            present = np.zeros(top + 1, dtype=bool)
            present[clocks.ravel()] = True
            values = np.flatnonzero(present)
            inverse = (np.cumsum(present) - 1)[clocks]
        else:
            values, inverse = np.unique(clocks, return_inverse=True)
            inverse = inverse.reshape(clocks.shape)
        digits = [str(int(v)).encode("ascii") for v in values]
        width = 2 + max((len(d) for d in digits), default=0)
        table = np.zeros((2, len(values), width), dtype=np.uint8)  # [opens its stage?, value, byte]
        for u, d in enumerate(digits):
            table[0, u, : 2 + len(d)] = np.frombuffer(b", " + d, dtype=np.uint8)
            table[1, u, : len(d)] = np.frombuffer(d, dtype=np.uint8)
        lengths = np.array([[2 + len(d) for d in digits], [len(d) for d in digits]], dtype=np.int64)
        opens = np.r_[True, stage_of[1:] != stage_of[:-1]].astype(np.int64) if len(stage_of) else np.zeros(0, np.int64)
        fields = table[opens[None, :], inverse]  # [plan, op, byte]
        self.data = memoryview(fields[fields != 0].tobytes())
        length = lengths[opens[None, :], inverse]  # [plan, op]
        ends = np.cumsum(length.ravel()).reshape(length.shape)
        last = np.r_[stage_of[1:] != stage_of[:-1], True] if len(stage_of) else np.zeros(0, bool)
        stage_end = ends[:, last]  # [plan, stage]
        stage_start = np.concatenate([np.zeros((len(clocks), 1), np.int64), stage_end], axis=1)[:, :-1]
        if len(clocks):
            stage_start[1:, 0] = stage_end[:-1, -1]
        self._bounds = np.stack([stage_start, stage_end], axis=-1).tolist()

    def spans(self, j: int) -> list[list[int]]:
        return self._bounds[j]


def _write_pieces(path: Path, pieces: list[bytes | memoryview]) -> None:
    """Write the concatenation of ``pieces`` (bytes-like) to ``path``, with one ``os.writev`` where it takes
    everything.

    An existing file is overwritten in place and then cut to length rather than
    truncated first: truncating frees every block of the old plan, and on a
    file system that discards freed blocks (ext4 ``discard``) rewriting the
    plans of an earlier run cost ten times more than writing them. The file
    ends up holding exactly the text either way.
    """
    size = sum(len(p) for p in pieces)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o666)
    try:
        done = os.writev(fd, pieces)
        if done < size:  # a short write (a signal, a full disk): the rest one piece at a time
            rest = memoryview(b"".join(bytes(p) for p in pieces))[done:]
            while rest:
                rest = rest[os.write(fd, rest) :]
        os.ftruncate(fd, size)
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
    return _framed_head(head) + ',\n "stages": [\n' + ",\n".join(f"  {line}" for line in stage_lines) + "\n ]\n}\n"


def _framed_head(head: dict) -> str:
    """The opening brace and one line per key of ``head``, up to the last value (no comma, no newline after it)."""
    return "{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in head.items())


def build_specs(
    profile: InstructionProfile, stages: int, model: str, unit_time_s: float, blocking_power_w: float
) -> dict[tuple[int, str], OpSpec]:
    profile.check_stages(stages, (FORWARD, BACKWARD))
    return {
        (s, inst): build_spec(profile.get(s, inst), model, unit_time_s, blocking_power_w)
        for s in range(stages)
        for inst in (FORWARD, BACKWARD)
    }


def frontier_problem(
    dag: PipelineDAG, specs: dict[tuple[int, str], OpSpec]
) -> tuple[int, np.ndarray, np.ndarray, list[int], list[int], list[np.ndarray]]:
    """The arguments of :func:`~zeus_plugins_perseus.tradeoff.solve_frontier` for ``dag`` with ``specs``: one
    spec per (stage, instruction), shared by its ops."""
    keys = list(specs)
    key_index = {k: j for j, k in enumerate(keys)}
    spec_of_op = np.array([key_index[(op.stage, op.instruction)] for op in dag.ops])
    return (dag.n_ops, dag.edges, spec_of_op, [specs[k].lo for k in keys], [specs[k].hi for k in keys], [specs[k].costs for k in keys])


def _solve(dag: PipelineDAG, specs: dict, unit_time_s: float, blocking_power_w: float, pareto_only: bool):
    """(time units, planned energy, clocks[plan, op], max-flow phases) of the solver's plans, fastest first."""
    keys = list(specs)
    problem = frontier_problem(dag, specs)
    spec_of_op = problem[2]
    time_price = dag.stages * unit_time_s * blocking_power_w  # the planned energy's blocking term per unit
    # with pareto_only, no plan slower than the least planned energy is kept: the walk starts near it
    fr = solve_frontier(*problem, time_price=time_price if pareto_only else None)
    t_units = fr.times[::-1]
    energy = fr.costs[::-1] + dag.stages * t_units * unit_time_s * blocking_power_w
    durations = fr.durations[::-1]
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


def real_time_limits(
    dag: PipelineDAG,
    profile: InstructionProfile,
    specs: dict[tuple[int, str], OpSpec],
    blocking_power_w: float,
    unit_time_s: float,
    max_gap_plans: int,
) -> list[float]:
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


def real_time_plans(planner: ExactPlanner, limits: list[float]) -> np.ndarray:
    """Clocks ``[plan, op]`` of the real-time plans (:meth:`ExactPlanner.plans`) as :func:`plan_frontier` lists
    them at ``limits[0]``: that plan is also planned from a cold HiGHS LP and the better of the two is kept."""
    plans = planner.plans(limits)
    check = planner.highs_plan(limits[0])
    (_, t1), (e0, e1) = emulate(planner.dag, planner.profile, np.vstack([plans[0], check]), planner.blocking_w)
    if t1 <= limits[0] * (1 + 1e-12) and e1 < e0:
        plans = plans.copy()
        plans[0] = check
    return plans


def check_limits(planner: ExactPlanner, zero_slowdown_s: float, chosen_s: float) -> list[float]:
    """The limits planned again from a cold HiGHS LP: the zero-slowdown one and the one the job chooses by (where
    a plan can meet it)."""
    if chosen_s == zero_slowdown_s or chosen_s < planner.t_fastest * (1 - 1e-12):
        return [zero_slowdown_s]
    return [zero_slowdown_s, chosen_s]


def claim(path: Path) -> bool:
    """True for the first process to ask (the file did not exist), False for every later one."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return True
    except FileExistsError:
        return False


def claimed_checks(planner: ExactPlanner, limits: list[float], folder: Path | None) -> dict[float, np.ndarray]:
    """The cold-HiGHS plan (:meth:`ExactPlanner.highs_plan`) of every limit this process claims in ``folder``
    before the other does (of all of them without a folder)."""
    return {lim: planner.highs_plan(lim) for k, lim in enumerate(limits) if folder is None or claim(folder / f"check-{k}")}


def claimed_reclaim(
    dag: PipelineDAG, profile: InstructionProfile, freqs: np.ndarray, blocking_power_w: float, folder: Path, parts: list[slice]
) -> list[tuple[slice, np.ndarray]]:
    """:func:`~zeus_plugins_perseus.reclaim.reclaim_slack` of each block of plans ``parts`` this process claims in
    ``folder`` before the other does, in the order given."""
    return [(rows, reclaim_slack(dag, profile, freqs[rows], blocking_power_w)) for rows in parts if claim(folder / f"reclaim-{rows.start}")]


def _reclaim_shared(
    bg: Background, folder: Path | None, dag: PipelineDAG, profile: InstructionProfile, freqs: np.ndarray, blocking_power_w: float
) -> np.ndarray:
    """:func:`~zeus_plugins_perseus.reclaim.reclaim_slack` of every plan, its blocks shared with the worker where
    there is one: this process takes them from the first, the worker from the last, each what the other has
    not taken. The blocks are the ones ``reclaim_slack`` uses, so the plans are the same either way."""
    parts = chunks(len(freqs))
    if folder is None or len(parts) < 2:
        return reclaim_slack(dag, profile, freqs, blocking_power_w)
    theirs = bg.submit(claimed_reclaim, dag, profile, freqs.astype(np.int32), blocking_power_w, folder, parts[::-1])
    out = np.empty_like(freqs)
    for rows, part in claimed_reclaim(dag, profile, freqs, blocking_power_w, folder, parts):
        out[rows] = part
    for rows, part in theirs.result():
        out[rows] = part
    return out


def _better_checks(
    checked: dict[float, np.ndarray],
    emu_t: np.ndarray,
    emu_e: np.ndarray,
    dag: PipelineDAG,
    profile: InstructionProfile,
    blocking_power_w: float,
) -> tuple[list[float], list[np.ndarray]]:
    """(limits, clocks) of the cold-HiGHS plans that meet their limit with less emulated energy than every other
    plan (``emu_t``, ``emu_e``) meeting it: those are listed too, and the limit's choice is theirs."""
    limits, plans = [], []
    for lim, f in sorted(checked.items()):
        (t,), (e,) = emulate(dag, profile, f[None], blocking_power_w)
        within = emu_e[emu_t <= lim * (1 + 1e-12)]
        if t <= lim * (1 + 1e-12) and (within.size == 0 or e < within.min()):
            limits.append(lim)
            plans.append(f[None])
    return limits, plans


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
    deadline_s: float | None = None,
    max_slowdown: float | None = None,
    meanwhile: Callable[[], Any] | None = None,
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
    flow by the canonical rule of :mod:`~zeus_plugins_perseus.exact`. Two
    limits are also planned from a cold HiGHS LP: the zero-slowdown one and
    the one the job chooses within (``deadline_s`` / ``max_slowdown``, as
    :meth:`PlanSet.choose` takes them), and such a plan is listed where it
    beats every other plan meeting its limit, so the chosen plan is never
    worse than a cold LP's. The real-time plans do not depend on the
    quantised ones, so they are planned in ``background`` (or a
    :class:`~zeus_plugins_perseus.background.Background` of ``workers``: None
    uses a second CPU where there is one, 1 keeps everything in this process)
    while this process solves the quantised frontier (pipelines of fewer
    than :data:`PARALLEL_MIN_OPS` instructions stay here unless ``workers``
    asks); the cold-LP checks and the quantised plans' slack reclamation are
    shared out between the two processes. The plans are the same either way.
    ``meanwhile`` is called here once the quantised frontier is solved, while
    the worker is still planning the real-time plans (the policy imports
    matplotlib there); the checks and the reclamation after it go to
    whichever process is free first.
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
        # what the two processes share out: who claimed a check or a block of plans first
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="zeus-perseus-"))) if bg.parallel else None
        if exact_fastest:
            limits = real_time_limits(dag, profile, specs, blocking_power_w, unit_time_s, max_gap_plans)
            planner = ExactPlanner(dag, profile, blocking_power_w)
            checks = check_limits(planner, limits[0], choice_limit_s(float(mt[0]), deadline_s, max_slowdown))
            # independent of the quantised plans: on the second CPU where there is one; the cold-LP checks
            # go to whichever process is free first
            real_time = bg.submit(planner.plans, limits)
            their_checks = bg.submit(claimed_checks, planner, checks, folder) if folder is not None else None
        t_units, energy, freqs, phases = _solve(dag, specs, unit_time_s, blocking_power_w, pareto_only)
        n_solver = len(t_units)
        if meanwhile is not None:
            meanwhile()
        if exact_fastest:  # before the reclaim blocks: the check is the longer task, the blocks fill in after it
            checked = claimed_checks(planner, checks, folder)
        if reclaim:
            freqs = _reclaim_shared(bg, folder, dag, profile, freqs, blocking_power_w)
        emu_t, emu_e = emulate(dag, profile, freqs, blocking_power_w)
        if exact_fastest:
            if their_checks is not None:
                checked.update(their_checks.result())
            f_exact = real_time.result()
            et, ee = emulate(dag, profile, f_exact, blocking_power_w)
            add_t, add_f = _better_checks(checked, np.concatenate([et, emu_t]), np.concatenate([ee, emu_e]), dag, profile, blocking_power_w)
            limits_all = list(limits) + add_t
            f_exact = np.vstack([f_exact] + add_f) if add_f else f_exact
            et, ee = emulate(dag, profile, f_exact, blocking_power_w)
            t_units = np.concatenate([np.array(limits_all) / unit_time_s, t_units])
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
        emitted = EmittedPlans(
            time_units=t_units[own],
            planned_energy_j=energy[own],
            emulated_time_s=emu_t[own],
            emulated_energy_j=emu_e[own],
            listed_as=listed_as[own],
        )
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
