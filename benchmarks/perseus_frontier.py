"""Perseus planner against the published solver (lowtime 0.3.0 from PyPI), measured in one run.

Sections (each prints a rich table):

1. exact  -- exponential (published) model, 8 stages: our frontier against lowtime's on
   each published profile: plan count, every iteration time, energies' max relative gap.
2. speed  -- whole frontier of GPT-3 175B / A100 at 8 x 32 and 16 x 64 (16 stages = the
   8-stage profile tiled twice), ours (both models) against lowtime where it finishes
   within ``--lowtime-timeout`` seconds; ratios printed.
3. default vs published model -- emulated frontiers: at every emulated time of a
   published-model plan, the least emulated energy of the measured-model plans that are
   at least as fast (counts where it is worse, and by how much).
4. saving -- emulated energy saving against all-max clocks of the least-energy plan that
   is no slower than all-max clocks (target: >= 15% on GPT-3 175B / A100, 8 stages, as
   in the paper), and of the fastest plan (with its slowdown), next to the hull bound: the
   saving of the convex-hull LP at the all-max time, which no plan can beat. The measured
   model's real-time plans (``exact.py``) are what makes "no slowdown" reachable;
   "quantised plans only" shows the frontier without them.

lowtime is imported in a subprocess by ``perseus_lowtime_driver.py``, with the python
given by ``--lowtime-python`` (default: this one). Without lowtime, sections 1 and 2
say so and compare against our own solver only.

    python benchmarks/perseus_frontier.py [--lowtime-python /path/to/python] [--quick]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from zeus_core.cost import pareto_frontier
from zeus_plugins_perseus.emulator import emulate
from zeus_plugins_perseus.exact import ExactPlanner, fastest_frequencies
from zeus_plugins_perseus.planner import plan_frontier
from zeus_plugins_perseus.profile import InstructionProfile, read_profile
from zeus_plugins_perseus.schedule import build_dag

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[0] / ".." / "shared" / "data" / "perseus_sosp24"
PROFILES = {
    "gpt3-175b+a100_sxm_bf16": 83.64,
    "bloom+a100_sxm_bf16": 83.64,
    "gpt3-175b+a40_bf16": 70.38,
    "bloom+a40_bf16": 70.38,
}
console = Console()


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
    t0 = time.perf_counter()
    ps = plan_frontier(profile, stages, mbs, "1f1b", unit, blocking, model)
    return ps, time.perf_counter() - t0


def section_exact(args, have_lowtime):
    table = Table(title=f"1. exact: published (exponential) model, {args.stages} x {args.mbs}, unit {args.unit} s")
    for col in ("profile", "plans ours / lowtime", "same times", "max rel. energy gap", "ours s", "lowtime s", "speed-up",
                "Pareto-optimal (listed)"):
        table.add_column(col)
    for name, blocking in PROFILES.items():
        path = DATA / f"{name}.csv"
        ps, t_ours = ours(read_profile(path), args.stages, args.mbs, args.unit, blocking, "exponential")
        if not have_lowtime:
            table.add_row(name, f"{len(ps.emitted.time_units)} / -", "-", "-", f"{t_ours:.2f}", "not installed", "-", str(len(ps)))
            continue
        lt, t_lt = run_lowtime(args.lowtime_python, path, args.stages, args.mbs, args.unit, blocking, args.lowtime_timeout)
        if lt is None:
            table.add_row(name, f"{len(ps.emitted.time_units)} / ?", "?", "?", f"{t_ours:.2f}", f"> {t_lt:.0f} (timeout)", "?",
                          str(len(ps)))
            continue
        # lowtime lists slowest first; ours fastest first. Compared: everything the solver emits
        # (frontier.csv lists only the Pareto-optimal ones; their count is the last column).
        em = ps.emitted
        lt_t, lt_e = lt[::-1, 0], lt[::-1, 1] + args.stages * lt[::-1, 0] * args.unit * blocking
        n = min(len(lt_t), len(em.time_units))
        same = len(lt_t) == len(em.time_units) and np.array_equal(lt_t, em.time_units)
        gap = float(np.max(np.abs(em.planned_energy_j[:n] - lt_e[:n]) / lt_e[:n])) if n else float("nan")
        table.add_row(name, f"{len(em.time_units)} / {len(lt_t)}", "yes" if same else "NO", f"{gap:.2e}", f"{t_ours:.2f}",
                      f"{t_lt:.1f}", f"{t_lt / t_ours:.0f}x", str(len(ps)))
    console.print(table)


def section_speed(args, have_lowtime):
    table = Table(title="2. speed: whole frontier, GPT-3 175B / A100 (ours: solve + clock mapping + emulation)")
    for col in ("size", "model", "plans", "max flows", "ours s", "lowtime s", "lowtime / ours"):
        table.add_column(col)
    base = read_profile(DATA / "gpt3-175b+a100_sxm_bf16.csv")
    blocking = PROFILES["gpt3-175b+a100_sxm_bf16"]
    for stages, mbs in args.sizes:
        prof = base if stages == len(base.stages) else tiled(base, stages)
        lt_s = None
        if have_lowtime and (stages, mbs) in args.lowtime_sizes:
            with tempfile.TemporaryDirectory() as tmp:
                csv_path = prof.to_csv(Path(tmp) / "profile.csv")
                lt, lt_s = run_lowtime(args.lowtime_python, csv_path, stages, mbs, args.unit, blocking, args.lowtime_timeout)
                lt_txt = f"{lt_s:.1f}" if lt is not None else f"> {lt_s:.0f} (timeout)"
        else:
            lt_txt = "not run" if have_lowtime else "not installed"
        for model in ("exponential", "measured"):
            ps, t = ours(prof, stages, mbs, args.unit, blocking, model)
            ratio = f"{lt_s / t:.0f}x" if (lt_s is not None and model == "exponential") else ""
            if lt_s is not None and model == "exponential" and lt_txt.startswith(">"):
                ratio = f"> {lt_s / t:.0f}x"
            table.add_row(f"{stages} x {mbs}", model, str(len(ps)), str(ps.phases), f"{t:.2f}",
                          lt_txt if model == "exponential" else "", ratio)
    console.print(table)


def section_default_vs_published(args):
    table = Table(title=f"3. emulated frontiers, measured (default) vs published model, {args.stages} x {args.mbs}")
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
            table.add_row(name, f"{unit:g}", str(len(ct)), f"{worse} ({100 * worse / len(ct):.1f}%)",
                          "none" if worse == 0 else ("no plan that fast" if np.isinf(worst) else f"{100 * worst:.2f}%"),
                          f"{me.min() / ce.min():.4f}")
    console.print(table)


def section_saving(args):
    table = Table(title="4. emulated saving against all max clocks, GPT-3 175B / A100, 8 stages")
    for col in ("M", "model", "unit s", "all-max s", "least energy at <= all-max time", "fastest plan: slowdown, saving",
                "hull bound"):
        table.add_column(col)
    prof = read_profile(DATA / "gpt3-175b+a100_sxm_bf16.csv")
    for mbs in args.saving_mbs:
        dag = build_dag("1f1b", 8, mbs)
        fmax = np.array([int(prof.get(op.stage, op.instruction).frequency.max()) for op in dag.ops])
        t_max, e_max = (float(x[0]) for x in emulate(dag, prof, fmax[None], 83.64))
        t_fast = float(emulate(dag, prof, fastest_frequencies(dag, prof)[None], 83.64)[0][0])
        # No plan is faster than all max clocks here, so the hull LP at that time bounds every
        # zero-slowdown plan's energy from below.
        bound = (f"{100 * (1 - ExactPlanner(dag, prof, 83.64).hull_energy_j(t_max) / e_max):.2f}%"
                 if t_fast >= t_max else "n/a")
        for model, unit, exact in (("exponential", args.unit, False), ("measured", args.unit, False),
                                   ("measured", args.unit / 10, False), ("measured", args.unit, True)):
            ps = plan_frontier(prof, 8, mbs, "1f1b", unit, 83.64, model, exact_fastest=exact)
            k = ps.choose(max_slowdown=1.0)
            ok = ps.meets(k, max_slowdown=1.0)
            zero = f"{100 * (1 - ps.emulated_energy_j[k] / ps.max_freq_energy_j):.2f}%" if ok else "no plan"
            f = int(np.argmin(ps.emulated_time_s))
            slow = ps.emulated_time_s[f] / ps.max_freq_time_s - 1
            label = model if model == "exponential" else ("measured (default)" if exact else "measured, quantised plans only")
            table.add_row(str(mbs), label, f"{unit:g}", f"{ps.max_freq_time_s:.4f}", zero,
                          f"+{100 * slow:.3f}%, {100 * (1 - ps.emulated_energy_j[f] / ps.max_freq_energy_j):.2f}%",
                          bound)
    console.print(table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lowtime-python", default=sys.executable)
    ap.add_argument("--lowtime-timeout", type=float, default=900.0)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (8 x 4 exactness, no 16 x 64 lowtime)")
    ap.add_argument("--skip", default="", help="comma-separated section numbers to skip")
    args = ap.parse_args()
    args.unit = 0.001
    args.stages, args.mbs = 8, (4 if args.quick else 12)
    args.sizes = [(8, 32), (16, 64)]
    args.lowtime_sizes = {(8, 32)}
    args.saving_mbs = (12, 32)
    skip = set(args.skip.split(","))
    have = lowtime_available(args.lowtime_python)
    console.print(f"lowtime: {'importable from ' + args.lowtime_python if have else 'NOT available (pip install lowtime==0.3.0)'}")
    if "1" not in skip:
        section_exact(args, have)
    if "2" not in skip:
        section_speed(args, have)
    if "3" not in skip:
        section_default_vs_published(args)
    if "4" not in skip:
        section_saving(args)


if __name__ == "__main__":
    main()
