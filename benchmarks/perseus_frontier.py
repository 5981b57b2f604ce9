"""Perseus planner against the published solver (lowtime 0.3.0) and the previous HiGHS path, in one run.

Sections (each prints a rich table):

1. exact  -- exponential (published) model, 8 stages: everything our solver emits against
   lowtime's on each published profile: plan count, every iteration time, energies' max
   relative gap (and how many of those plans are Pareto-optimal, what frontier.csv lists).
2. speed  -- whole-process ``zeus run`` of GPT-3 175B / A100 at 8 x 32 and 16 x 64 (16
   stages = the 8-stage profile tiled twice), default model: wall time, CPU time (with the
   worker process) and peak memory, median of ``--repeat`` runs, against the targets (8 x 32
   <= 2 s; 16 x 64 <= 6 s and <= 400 MiB), next to the previous HiGHS path (the same command
   on the code at ``--previous``, a git revision) and lowtime's planning time, as ratios.
3. growth -- planning time over M = 8..128 at 8 stages: ours, the previous HiGHS path, and
   lowtime where it finishes within ``--lowtime-timeout`` seconds; the factor per doubling.
4. default vs published model -- emulated frontiers: at every emulated time of a
   published-model plan, the least emulated energy of the measured-model plans that are
   at least as fast (counts where it is worse, and by how much).
5. saving -- emulated energy saving against all-max clocks of the least-energy plan that
   is no slower than all-max clocks (GPT-3 175B / A100, 8 stages), and of the fastest plan
   (with its slowdown), next to the hull bound: the saving of the convex-hull LP at the
   all-max time, which no plan can beat. "quantised plans only" shows the frontier without
   the real-time plans.
6. gap per M -- the zero-slowdown plan's saving against that hull bound, M = 8..128.
7. cold LP -- at every real-time limit of the default model, the listed frontier's least
   energy at or below the limit against the plan a cold HiGHS solve of that limit gives
   (its vertex mapped, repaired and reclaimed as the canonical solutions are, and as the
   previous path did): where it is worse, and by how much; the zero-slowdown plan and the
   job's chosen limit are checked against it by the planner itself.
8. priced start -- the default model's quantised walk from the all-slowest time against the
   walk from its priced start (``tradeoff.solve_frontier(time_price=...)``), in this process:
   phases, seconds (median of ``--repeat``, interleaved) and their ratio, and whether the plans
   up to the least planned energy (what the planner keeps) are the same.

lowtime is imported in a subprocess by ``perseus_lowtime_driver.py``, with the python
given by ``--lowtime-python`` (default: this one); without lowtime, sections 1 to 3 say
so. The previous path runs from a temporary ``git worktree`` of ``--previous`` (default:
the commit before the parametric flow), put first on ``sys.path`` of its processes.

    python benchmarks/perseus_frontier.py [--lowtime-python PY] [--previous REV] [--quick] [--skip 1,4]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from zeus_core import pareto_frontier
from zeus_plugins_perseus.clock_options import fastest_frequencies
from zeus_plugins_perseus.emulator import emulate
from zeus_plugins_perseus.exact import ExactPlanner
from zeus_plugins_perseus.planner import build_specs, frontier_problem, plan_frontier, real_time_plans
from zeus_plugins_perseus.profile import InstructionProfile, read_profile
from zeus_plugins_perseus.reclaim import reclaim_slack
from zeus_plugins_perseus.schedule import build_dag
from zeus_plugins_perseus.tradeoff import solve_frontier

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[0] / ".." / "shared" / "data" / "perseus_sosp24"
PROFILES = {
    "gpt3-175b+a100_sxm_bf16": 83.64,
    "bloom+a100_sxm_bf16": 83.64,
    "gpt3-175b+a40_bf16": 70.38,
    "bloom+a40_bf16": 70.38,
}
console = Console(width=220)
#: the code of the previous HiGHS path: main when this branch forked from it (real-time plans from one
#: cold HiGHS LP per limit through scipy's HiGHS, on forked workers)
PREVIOUS = "05bc78b"


@contextlib.contextmanager
def previous_checkout(rev: str):
    """A temporary ``git worktree`` of ``rev`` (None: no previous path), removed afterwards."""
    if not rev:
        yield None
        return
    tmp = Path(tempfile.mkdtemp(prefix="perseus-previous-"))
    where = tmp / "tree"
    r = subprocess.run(["git", "-C", str(HERE), "worktree", "add", "--detach", str(where), rev], capture_output=True, text=True)
    if r.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SystemExit(f"--previous {rev}: git worktree add failed: {r.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["git", "-C", str(HERE), "worktree", "remove", "--force", str(where)], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


def previous_paths(previous: Path) -> list[str]:
    """Where the code at ``previous`` lives: the core and every plugin package of that checkout."""
    dirs = sorted(previous.glob("zeus_plugins_*")) + sorted((previous / "plugins").glob("zeus_plugins_*"))
    return [str(d) for d in dirs if d.is_dir()] + [str(previous)]


def previous_env(previous: Path | None) -> dict[str, str] | None:
    """The environment of a process of the code at ``previous``: it and its worker processes (``python -m ...``)
    import from there, not from this checkout's editable installs, and the plugins that checkout does not have
    (installed here, written against today's core) are disabled."""
    if previous is None:
        return None
    from importlib.metadata import entry_points

    missing = [
        ep.name
        for ep in entry_points(group="zeus")
        if not any((Path(d) / ep.value.split(".")[0]).is_dir() for d in previous_paths(previous))
    ]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(previous_paths(previous)), ZEUS_DISABLED_PLUGINS=",".join(missing))


def with_previous(previous: Path | None) -> list[str]:
    """The interpreter command that imports zeus (and the plugin) from ``previous`` first, or from here."""
    if previous is None:
        return [sys.executable]
    paths = previous_paths(previous)
    return [
        sys.executable,
        "-c",
        f"import sys, runpy; sys.path[:0] = {paths!r}; sys.argv.pop(0); "
        "run = runpy.run_path if sys.argv[0].endswith('.py') else runpy.run_module; "
        "run(sys.argv[0], run_name='__main__')",
    ]


def tiled(profile: InstructionProfile, stages: int) -> InstructionProfile:
    """A ``stages``-stage profile whose stage s is the published stage s mod N."""
    n = len(profile.stages)
    rows = []
    for s in range(stages):
        for (ps, inst), o in profile.options.items():
            if ps == s % n:
                rows += [(s, inst, int(f), float(t), float(e)) for f, t, e in zip(o.frequency, o.time, o.energy)]
    return InstructionProfile.from_rows(rows, source=f"{profile.source} tiled to {stages} stages")


def lowtime_available(python: str) -> bool:
    r = subprocess.run([python, "-c", "import lowtime"], capture_output=True)
    return r.returncode == 0


def run_lowtime(python: str, csv_path: Path, stages: int, mbs: int, unit: float, blocking: float, timeout: float):
    """lowtime's plans as (quant_time, fitted cost) rows, and its wall time; None on timeout."""
    cmd = [python, str(HERE / "perseus_lowtime_driver.py"), str(csv_path), str(stages), str(mbs), str(unit), str(blocking)]
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"lowtime driver failed:\n{r.stderr[-2000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return np.array(out["plans"], dtype=float).reshape(-1, 2), out["total_s"]


def ours(profile, stages, mbs, unit, blocking, model):
    ps, wall, _ = ours_timed(profile, stages, mbs, unit, blocking, model)
    return ps, wall


def ours_timed(profile, stages, mbs, unit, blocking, model):
    """(plans, wall s, CPU s of this process and of the plan workers it forked)."""
    t0, c0, k0 = time.perf_counter(), time.process_time(), os.times()
    ps = plan_frontier(profile, stages, mbs, "1f1b", unit, blocking, model)
    k1 = os.times()
    cpu = time.process_time() - c0 + (k1.children_user - k0.children_user) + (k1.children_system - k0.children_system)
    return ps, time.perf_counter() - t0, cpu


def section_exact(args, have_lowtime):
    table = Table(title=f"1. exact: published (exponential) model, {args.stages} x {args.mbs}, unit {args.unit} s")
    for col in (
        "profile",
        "plans ours / lowtime",
        "same times",
        "max rel. energy gap",
        "ours s",
        "lowtime s",
        "speed-up",
        "Pareto-optimal (listed)",
    ):
        table.add_column(col)
    for name, blocking in PROFILES.items():
        path = DATA / f"{name}.csv"
        ps, t_ours = ours(read_profile(path), args.stages, args.mbs, args.unit, blocking, "exponential")
        if not have_lowtime:
            table.add_row(name, f"{len(ps.emitted.time_units)} / -", "-", "-", f"{t_ours:.2f}", "not installed", "-", str(len(ps)))
            continue
        lt, t_lt = run_lowtime(args.lowtime_python, path, args.stages, args.mbs, args.unit, blocking, args.lowtime_timeout)
        if lt is None:
            table.add_row(
                name, f"{len(ps.emitted.time_units)} / ?", "?", "?", f"{t_ours:.2f}", f"> {t_lt:.0f} (timeout)", "?", str(len(ps))
            )
            continue
        # lowtime lists slowest first; ours fastest first. Compared: everything the solver emits
        # (frontier.csv lists only the Pareto-optimal ones; their count is the last column).
        em = ps.emitted
        lt_t, lt_e = lt[::-1, 0], lt[::-1, 1] + args.stages * lt[::-1, 0] * args.unit * blocking
        n = min(len(lt_t), len(em.time_units))
        same = len(lt_t) == len(em.time_units) and np.array_equal(lt_t, em.time_units)
        gap = float(np.max(np.abs(em.planned_energy_j[:n] - lt_e[:n]) / lt_e[:n])) if n else float("nan")
        table.add_row(
            name,
            f"{len(em.time_units)} / {len(lt_t)}",
            "yes" if same else "NO",
            f"{gap:.2e}",
            f"{t_ours:.2f}",
            f"{t_lt:.1f}",
            f"{t_lt / t_ours:.0f}x",
            str(len(ps)),
        )
    console.print(table)


def run_zeus(job: Path, out: Path, previous: Path | None = None) -> tuple[float, float, float, str]:
    """Whole-process ``zeus run JOB --fresh --output OUT``: (wall s, CPU s, peak RSS MiB, its output).

    CPU is user + system time of the process and the worker processes it
    waited for: on a shared machine it varies less than the wall time. Peak
    memory is the largest process's.
    """
    cmd = (
        with_previous(previous)
        + (["zeus_core.cli"] if previous else ["-m", "zeus_core.cli"])
        + ["run", str(job), "--fresh", "--output", str(out)]
    )
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=previous_env(previous))
    text = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"zeus run {job} failed:\n{text[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, text


def job_file(folder: Path, profile: Path, stages: int, mbs: int, model: str, extra: str = "") -> Path:
    path = folder / f"job-{stages}x{mbs}-{model}.toml"
    path.write_text(
        f'[job]\nname = "bench-{stages}x{mbs}-{model}"\n\n[frequency_plan]\nplugin = "perseus"\n'
        f'profile = "{profile}"\nstages = {stages}\nmicrobatches = {mbs}\nschedule = "1f1b"\n'
        f'unit_time_s = 0.001\nblocking_power_w = 83.64\nmodel = "{model}"\nmax_slowdown = 1.0\n{extra}'
    )
    return path


def section_speed(args, have_lowtime):
    """Whole-process ``zeus run`` (start-up, planning, every output file and figure), the way a user runs it."""
    table = Table(title="2. speed: whole-process `zeus run`, GPT-3 175B / A100, default model (16 stages: the 8-stage profile tiled)")
    for col in (
        "size",
        "plans",
        "wall s",
        "cpu s",
        "peak MiB",
        "target",
        "previous path: wall s, cpu s, peak MiB",
        "previous / new (wall, cpu)",
        "lowtime planning s",
        "lowtime / new (wall)",
    ):
        table.add_column(col)
    base = read_profile(DATA / "gpt3-175b+a100_sxm_bf16.csv")
    targets = {(8, 32): (2.0, None), (16, 64): (6.0, 400.0)}
    with tempfile.TemporaryDirectory() as tmp, previous_checkout(args.previous) as previous:
        tmp = Path(tmp)
        for stages, mbs in args.sizes:
            prof = base if stages == len(base.stages) else tiled(base, stages)
            csv_path = prof.to_csv(tmp / f"profile-{stages}.csv")
            job = job_file(tmp, csv_path, stages, mbs, "measured")
            runs: dict[str, list] = {"new": [], "previous": []}
            for _ in range(args.repeat):  # interleaved, so that both see the same load
                runs["new"].append(run_zeus(job, tmp / "out")[:3])
                plans = len((tmp / "out" / "frontier.csv").read_text().splitlines()) - 1
                if previous is not None:
                    runs["previous"].append(run_zeus(job, tmp / "out-previous", previous)[:3])
            wall, cpu, peak = (float(np.median(col)) for col in zip(*runs["new"]))
            t_max, m_max = targets.get((stages, mbs), (None, None))
            goal = ""
            if t_max is not None:
                ok = wall <= t_max and (m_max is None or peak <= m_max)
                goal = f"<= {t_max:g} s" + (f", <= {m_max:g} MiB" if m_max else "") + (": met" if ok else ": MISSED")
            prev_cells = ["not run", ""]
            if runs["previous"]:
                pw, pc, pp = (float(np.median(col)) for col in zip(*runs["previous"]))
                prev_cells = [f"{pw:.2f}, {pc:.2f}, {pp:.0f}", f"{pw / wall:.1f}x, {pc / cpu:.1f}x"]
            lt_cells = ["not installed", ""]
            if have_lowtime:
                lt, lt_s = run_lowtime(args.lowtime_python, csv_path, stages, mbs, 0.001, 83.64, args.lowtime_timeout)
                lt_cells = [f"> {lt_s:.0f} (timeout)", f"> {lt_s / wall:.0f}x"] if lt is None else [f"{lt_s:.1f}", f"{lt_s / wall:.0f}x"]
            table.add_row(f"{stages} x {mbs}", str(plans), f"{wall:.2f}", f"{cpu:.2f}", f"{peak:.0f}", goal, *prev_cells, *lt_cells)
    console.print(table)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    console.print(
        f"(median of {args.repeat} runs each, new and previous interleaved; wall time includes Python "
        f"start-up, plugin loading and writing every plan file and both figures; cpu = user + system of "
        f"zeus and its worker processes; peak = the largest process; lowtime: its planning only, one run; "
        f"previous = {args.previous}; {cpus} CPUs, load average {_load()} at the end)"
    )


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


_TIME_PLANNING = """
import json, os, sys, time
from zeus_plugins_perseus.planner import plan_frontier
from zeus_plugins_perseus.profile import read_profile
prof = read_profile(sys.argv[1])
t0, c0, k0 = time.perf_counter(), time.process_time(), os.times()
ps = plan_frontier(prof, int(sys.argv[2]), int(sys.argv[3]), "1f1b", 0.001, 83.64, sys.argv[4])
k1 = os.times()
cpu = time.process_time() - c0 + (k1.children_user - k0.children_user) + (k1.children_system - k0.children_system)
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": cpu, "plans": len(ps)}))
"""


def time_planning(csv_path: Path, stages: int, mbs: int, model: str, previous: Path | None = None) -> dict:
    """``plan_frontier`` in a fresh process (of the code at ``previous``, or this one): wall and CPU seconds."""
    cmd = with_previous(previous) if previous else [sys.executable]
    if previous:
        script = Path(tempfile.mkdtemp()) / "time_planning.py"
        script.write_text(_TIME_PLANNING)
        cmd = cmd + [str(script)]
    else:
        cmd = cmd + ["-c", _TIME_PLANNING]
    r = subprocess.run(cmd + [str(csv_path), str(stages), str(mbs), model], capture_output=True, text=True, env=previous_env(previous))
    if r.returncode != 0:
        raise RuntimeError(f"planning failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def section_growth(args, have_lowtime):
    """Planning time over microbatches at 8 stages: ours, the previous HiGHS path, lowtime where it finishes."""
    table = Table(title="3. growth with microbatches: whole frontier of GPT-3 175B / A100, 8 stages (planning only, default model)")
    for col in (
        "M",
        "new s",
        "(cpu s)",
        "x per doubling",
        "previous s",
        "(cpu s)",
        "previous / new",
        "lowtime s",
        "lowtime / new",
        "x per doubling",
    ):
        table.add_column(col)
    csv_path = DATA / "gpt3-175b+a100_sxm_bf16.csv"
    blocking = PROFILES["gpt3-175b+a100_sxm_bf16"]
    prev: dict[str, float | None] = {"new": None, "lowtime": None}
    lowtime_done = have_lowtime
    with previous_checkout(args.previous) as previous:
        for mbs in args.growth_mbs:
            new = time_planning(csv_path, 8, mbs, "measured")
            cells = [str(mbs), f"{new['wall']:.2f}", f"{new['cpu']:.2f}", f"{new['wall'] / prev['new']:.2f}" if prev["new"] else ""]
            prev["new"] = new["wall"]
            if previous is not None:
                old = time_planning(csv_path, 8, mbs, "measured", previous)
                cells += [f"{old['wall']:.2f}", f"{old['cpu']:.2f}", f"{old['wall'] / new['wall']:.1f}x"]
            else:
                cells += ["not run", "", ""]
            if lowtime_done:
                lt, lt_s = run_lowtime(args.lowtime_python, csv_path, 8, mbs, args.unit, blocking, args.lowtime_timeout)
                if lt is None:
                    cells += [f"> {lt_s:.0f} (timeout)", f"> {lt_s / new['wall']:.0f}x", ""]
                    lowtime_done = False  # larger M only takes longer
                else:
                    cells += [f"{lt_s:.1f}", f"{lt_s / new['wall']:.0f}x", f"{lt_s / prev['lowtime']:.2f}" if prev["lowtime"] else ""]
                    prev["lowtime"] = lt_s
            else:
                cells += ["not run" if have_lowtime else "not installed", "", ""]
            table.add_row(*cells)
    console.print(table)
    console.print(
        f"(wall seconds of plan_frontier in a fresh process each; cpu adds its worker processes; load average {_load()} at the end)"
    )


def section_default_vs_published(args):
    table = Table(title=f"4. emulated frontiers, measured (default) vs published model, {args.stages} x {args.mbs}")
    for col in ("profile", "unit s", "published pts", "measured worse at", "worst gap", "measured min E / published min E"):
        table.add_column(col)
    for name, blocking in PROFILES.items():
        prof = read_profile(DATA / f"{name}.csv")
        comp, _ = ours(prof, args.stages, args.mbs, args.unit, blocking, "exponential")
        ci = pareto_frontier(comp.emulated_time_s, comp.emulated_energy_j)
        ct, ce = comp.emulated_time_s[ci], comp.emulated_energy_j[ci]
        for unit in sorted({args.unit, args.unit / 10}, reverse=True):
            meas, _ = ours(prof, args.stages, args.mbs, unit, blocking, "measured")
            mi = pareto_frontier(meas.emulated_time_s, meas.emulated_energy_j)
            mt, me = meas.emulated_time_s[mi], meas.emulated_energy_j[mi]
            worse, worst = 0, 0.0
            for t, e in zip(ct, ce):
                ok = me[mt <= t * (1 + 1e-12)]
                best = ok.min() if ok.size else np.inf
                if best > e * (1 + 1e-9):
                    worse += 1
                    worst = max(worst, (best - e) / e) if np.isfinite(best) else np.inf
            table.add_row(
                name,
                f"{unit:g}",
                str(len(ct)),
                f"{worse} ({100 * worse / len(ct):.1f}%)",
                "none" if worse == 0 else ("no plan that fast" if np.isinf(worst) else f"{100 * worst:.2f}%"),
                f"{me.min() / ce.min():.4f}",
            )
    console.print(table)


def section_saving(args):
    table = Table(title="5. emulated saving against all max clocks, GPT-3 175B / A100, 8 stages")
    for col in ("M", "model", "unit s", "all-max s", "least energy at <= all-max time", "fastest plan: slowdown, saving", "hull bound"):
        table.add_column(col)
    prof = read_profile(DATA / "gpt3-175b+a100_sxm_bf16.csv")
    for mbs in args.saving_mbs:
        dag = build_dag("1f1b", 8, mbs)
        fmax = np.array([int(prof.get(op.stage, op.instruction).frequency.max()) for op in dag.ops])
        t_max, e_max = (float(x[0]) for x in emulate(dag, prof, fmax[None], 83.64))
        t_fast = float(emulate(dag, prof, fastest_frequencies(dag, prof)[None], 83.64)[0][0])
        # No plan is faster than all max clocks here, so the hull LP at that time bounds every
        # zero-slowdown plan's energy from below.
        bound = f"{100 * (1 - ExactPlanner(dag, prof, 83.64).hull_energy_j(t_max) / e_max):.2f}%" if t_fast >= t_max else "n/a"
        for model, unit, exact in (
            ("exponential", args.unit, False),
            ("measured", args.unit, False),
            ("measured", args.unit / 10, False),
            ("measured", args.unit, True),
        ):
            ps = plan_frontier(prof, 8, mbs, "1f1b", unit, 83.64, model, exact_fastest=exact)
            k = ps.choose(max_slowdown=1.0)
            ok = ps.meets(k, max_slowdown=1.0)
            zero = f"{100 * (1 - ps.emulated_energy_j[k] / ps.max_freq_energy_j):.2f}%" if ok else "no plan"
            f = int(np.argmin(ps.emulated_time_s))
            slow = ps.emulated_time_s[f] / ps.max_freq_time_s - 1
            label = model if model == "exponential" else ("measured (default)" if exact else "measured, quantised plans only")
            table.add_row(
                str(mbs),
                label,
                f"{unit:g}",
                f"{ps.max_freq_time_s:.4f}",
                zero,
                f"+{100 * slow:.3f}%, {100 * (1 - ps.emulated_energy_j[f] / ps.max_freq_energy_j):.2f}%",
                bound,
            )
    console.print(table)


def zero_slowdown_gap(prof: InstructionProfile, mbs: int, blocking: float) -> tuple[float, float, float, float]:
    """(all-max time s, saving of the zero-slowdown plan, hull bound, seconds) at 8 stages and ``mbs`` microbatches.

    The zero-slowdown plan is what the default model lists first: the real-time
    plan at exactly the all-max-clock iteration time (``real_time_plans``).
    """
    dag = build_dag("1f1b", 8, mbs)
    fmax = np.array([int(prof.get(op.stage, op.instruction).frequency.max()) for op in dag.ops])
    t_max, e_max = (float(x[0]) for x in emulate(dag, prof, fmax[None], blocking))
    t0 = time.perf_counter()
    planner = ExactPlanner(dag, prof, blocking)
    plan = real_time_plans(planner, [t_max])[0]
    seconds = time.perf_counter() - t0
    t, e = (float(x[0]) for x in emulate(dag, prof, plan[None], blocking))
    assert t <= t_max * (1 + 1e-12)
    return t_max, 1 - e / e_max, 1 - planner.hull_energy_j(t_max) / e_max, seconds


def section_gap(args):
    table = Table(title="6. zero-slowdown saving against the hull bound per M, GPT-3 175B / A100, 8 stages")
    for col in ("M", "all-max s", "zero-slowdown saving", "hull bound", "gap (points)", "plan s"):
        table.add_column(col)
    prof = read_profile(DATA / "gpt3-175b+a100_sxm_bf16.csv")
    for mbs in args.gap_mbs:
        t_max, saving, bound, seconds = zero_slowdown_gap(prof, mbs, PROFILES["gpt3-175b+a100_sxm_bf16"])
        table.add_row(
            str(mbs), f"{t_max:.4f}", f"{100 * saving:.2f}%", f"{100 * bound:.2f}%", f"{100 * (bound - saving):.3f}", f"{seconds:.2f}"
        )
    console.print(table)
    console.print(
        "(no plan is faster than all max clocks on this profile, so the convex-hull LP at the all-max time "
        "bounds every zero-slowdown plan's energy from below)"
    )


def previous_gap_plan(planner: ExactPlanner, limit: float, zero_slowdown: bool) -> np.ndarray:
    """The plan the previous path made at ``limit``: one cold HiGHS LP, its durations mapped to clocks and
    repaired, then the greedy pass (the zero-slowdown plan) or the level passes (the others)."""
    dur, _ = planner.lp.solve(limit)
    choice = planner.repair(np.maximum((planner.op_t <= (dur + 1e-9)[:, None]).sum(axis=1) - 1, 0), limit)
    if zero_slowdown:
        return planner.finish(choice, limit)
    return reclaim_slack(planner.dag, planner.profile, planner.op_f[np.arange(planner.n), choice][None], planner.blocking_w)[0]


def section_cold_lp(args):
    table = Table(title="7. every real-time limit: the listed frontier against a cold HiGHS solve of that limit (default model, 8 stages)")
    for col in (
        "profile",
        "M",
        "limits",
        "worse at",
        "worst (J)",
        "zero-slowdown (J)",
        "sum over limits (J)",
        "worse at (previous passes)",
        "worst (J)",
    ):
        table.add_column(col)
    totals = [0, 0, 0]
    for name, blocking in PROFILES.items():
        prof = read_profile(DATA / f"{name}.csv")
        for mbs in args.cold_mbs:
            ps = plan_frontier(prof, 8, mbs, "1f1b", args.unit, blocking, "measured")
            planner = ExactPlanner(ps.dag, prof, blocking)
            limits = ps.real_time_limits_s.tolist()
            gaps = []
            for cold in (
                np.array([planner.highs_plan(lim) for lim in limits]),
                np.array([previous_gap_plan(planner, lim, k == 0) for k, lim in enumerate(limits)]),
            ):
                _, ce = emulate(ps.dag, prof, cold, blocking)
                gaps.append(
                    np.array([ps.emulated_energy_j[ps.emulated_time_s <= lim * (1 + 1e-12)].min() - e for lim, e in zip(limits, ce)])
                )
            worse = [int((g > 1e-9).sum()) for g in gaps]
            totals[0] += worse[0]
            totals[1] += worse[1]
            totals[2] += len(limits)
            table.add_row(
                name,
                str(mbs),
                str(len(limits)),
                str(worse[0]),
                f"{max(gaps[0].max(), 0):.3f}",
                f"{gaps[0][0]:+.3f}",
                f"{gaps[0].sum():+.1f}",
                str(worse[1]),
                f"{max(gaps[1].max(), 0):.3f}",
            )
    console.print(table)
    console.print(
        f"(negative = the frontier uses less energy at or below the limit than the cold-LP plan; the cold "
        f"vertex mapped, repaired and reclaimed as the canonical solutions are, or (last two columns) as the "
        f"previous path did; worse at {totals[0]} and {totals[1]} of {totals[2]} limits in all)"
    )


def section_priced_start(args):
    """The quantised frontier walked from the all-slowest time and from the priced start, in this process."""
    table = Table(
        title="8. the quantised walk's priced start (default model): against the walk from the all-slowest "
        "time, plans up to the least planned energy"
    )
    for col in (
        "profile",
        "size",
        "unit ms",
        "phases: full, priced",
        "s: full, priced (median)",
        "full / priced",
        "kept plans",
        "plans that differ",
    ):
        table.add_column(col)
    for stages, mbs, name, unit in args.priced_cases:
        base = read_profile(DATA / f"{name}.csv")
        prof = base if stages == len(base.stages) else tiled(base, stages)
        blocking = PROFILES[name]
        dag = build_dag("1f1b", stages, mbs)
        problem = frontier_problem(dag, build_specs(prof, stages, "measured", unit, blocking))
        price = stages * unit * blocking
        runs: dict[str, list] = {"full": [], "priced": []}
        for _ in range(args.repeat):  # interleaved
            for kind, kw in (("full", {}), ("priced", {"time_price": price})):
                t0 = time.perf_counter()
                fr = solve_frontier(*problem, **kw)
                runs[kind].append((time.perf_counter() - t0, fr))
        full, priced = runs["full"][0][1], runs["priced"][0][1]
        s_full, s_priced = (float(np.median([t for t, _ in runs[k]])) for k in ("full", "priced"))
        kept = [int(np.argmin((fr.costs + price * fr.times)[::-1])) + 1 for fr in (full, priced)]
        same_times = kept[0] == kept[1] and np.array_equal(full.times[::-1][: kept[0]], priced.times[::-1][: kept[1]])
        differ = (
            str(int((full.durations[::-1][: kept[0]] != priced.durations[::-1][: kept[1]]).any(axis=1).sum()))
            if same_times
            else "other times"
        )
        table.add_row(
            name,
            f"{stages} x {mbs}",
            f"{unit * 1e3:g}",
            f"{full.phases}, {priced.phases}",
            f"{s_full:.2f}, {s_priced:.2f}",
            f"{s_full / s_priced:.2f}x",
            f"{kept[0]}, {kept[1]}",
            differ,
        )
    console.print(table)
    console.print("(plans that differ: among the kept plans, those whose durations are not the full walk's)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lowtime-python", default=sys.executable)
    ap.add_argument("--lowtime-timeout", type=float, default=900.0)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (8 x 4 exactness, M up to 32)")
    ap.add_argument("--repeat", type=int, default=3, help="whole-process runs per size and model (median)")
    ap.add_argument("--skip", default="", help="comma-separated section numbers to skip")
    ap.add_argument("--previous", default=PREVIOUS, help="git revision of the previous HiGHS path ('' to skip it)")
    args = ap.parse_args()
    args.unit = 0.001
    args.stages, args.mbs = 8, (4 if args.quick else 12)
    args.sizes = [(8, 32), (16, 64)]
    args.growth_mbs = (8, 16, 32) if args.quick else (8, 16, 32, 64, 128)
    args.saving_mbs = (12, 32)
    args.gap_mbs = (8, 12, 16, 32) if args.quick else (8, 12, 16, 32, 64, 128)
    args.cold_mbs = (12,) if args.quick else (12, 32)
    args.priced_cases = (
        [(8, mbs, name, 0.001) for name in PROFILES for mbs in ((12,) if args.quick else (12, 32))]
        + [(8, 12, name, 0.0001) for name in PROFILES]
        + ([] if args.quick else [(16, 64, "gpt3-175b+a100_sxm_bf16", 0.001)])
    )
    skip = set(args.skip.split(","))
    have = lowtime_available(args.lowtime_python)
    console.print(f"lowtime: {'importable from ' + args.lowtime_python if have else 'NOT available (pip install lowtime==0.3.0)'}")
    sections = [
        ("1", section_exact, (args, have)),
        ("2", section_speed, (args, have)),
        ("3", section_growth, (args, have)),
        ("4", section_default_vs_published, (args,)),
        ("5", section_saving, (args,)),
        ("6", section_gap, (args,)),
        ("7", section_cold_lp, (args,)),
        ("8", section_priced_start, (args,)),
    ]
    for number, section, section_args in sections:
        if number not in skip:
            section(*section_args)


if __name__ == "__main__":
    main()
