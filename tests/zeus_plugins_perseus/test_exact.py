"""The real-time plan at a limit: exactly meets it on the measured profile, and spends the slack."""

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perseus_fakes import two_stage_rows  # noqa: E402
from zeus_plugins_perseus.emulator import emulate  # noqa: E402
from zeus_plugins_perseus.exact import exact_plan  # noqa: E402
from zeus_plugins_perseus.planner import plan_frontier  # noqa: E402
from zeus_plugins_perseus.profile import InstructionProfile, read_profile  # noqa: E402
from zeus_plugins_perseus.schedule import build_dag  # noqa: E402

BLOCKING = 60.0


def all_max(dag, prof):
    fmax = np.array([int(prof.get(o.stage, o.instruction).frequency.max()) for o in dag.ops])
    t, e = emulate(dag, prof, fmax[None], BLOCKING)
    return float(t[0]), float(e[0])


def test_close_to_brute_force_on_a_tiny_pipeline():
    prof = InstructionProfile.from_rows(two_stage_rows())
    dag = build_dag("1f1b", 2, 2)
    t_max, e_max = all_max(dag, prof)
    clocks = [1410, 1200, 1000, 800]
    combos = np.array(list(itertools.product(clocks, repeat=dag.n_ops)))
    t, e = emulate(dag, prof, combos, BLOCKING)
    for limit in (t_max, t_max * 1.1, t_max * 1.3):
        best = float(e[t <= limit].min())
        f = exact_plan(dag, prof, BLOCKING, limit)
        et, ee = emulate(dag, prof, f[None], BLOCKING)
        assert et[0] <= limit  # exact, no tolerance
        assert best <= ee[0] <= best * 1.01  # within 1% of the best of all 4^8 plans
    assert ee[0] < e_max


def test_fastest_plan_is_exactly_as_fast_as_all_max_clocks(gpt3_a100):
    prof = read_profile(gpt3_a100)
    ps = plan_frontier(prof, 8, 4, "1f1b", 0.001, 83.64)
    assert ps.exact_fastest
    assert ps.emulated_time_s[0] <= ps.max_freq_time_s and ps.planned_time_s[0] == ps.max_freq_time_s
    assert ps.choose(max_slowdown=1.0) == 0 and ps.meets(0, max_slowdown=1.0)
    assert ps.emulated_energy_j[0] < 0.95 * ps.max_freq_energy_j
    # still a frontier on the measured profile: slower plans save energy
    assert np.all(np.diff(ps.emulated_time_s) > 0) and np.all(np.diff(ps.emulated_energy_j) < 0)
    published = plan_frontier(prof, 8, 4, "1f1b", 0.001, 83.64, model="exponential")
    assert not published.exact_fastest and not published.meets(published.choose(max_slowdown=1.0), max_slowdown=1.0)


def test_limit_below_all_fastest_is_refused():
    prof = InstructionProfile.from_rows(two_stage_rows())
    dag = build_dag("gpipe", 2, 3)
    with pytest.raises(ValueError, match="no plan meets"):
        exact_plan(dag, prof, BLOCKING, all_max(dag, prof)[0] * 0.99)


def test_highs_gets_the_model_linprog_gives_it(gpt3_a100):
    """The direct HiGHS call returns linprog's answer to the bit: the plans depend on which optimal vertex it is."""
    from scipy.optimize import linprog
    from zeus_plugins_perseus.exact import ExactPlanner

    prof = read_profile(gpt3_a100)
    dag = build_dag("1f1b", 8, 6)
    planner = ExactPlanner(dag, prof, 83.64)
    t_max, _ = all_max(dag, prof)
    for limit in (t_max, t_max + 0.0013, t_max * 1.05, t_max * 1.4):
        b = planner.b0.copy()
        b[planner.n_edges:] += limit
        ref = linprog(planner.cost, A_ub=planner.A, b_ub=b, bounds=planner.bounds, method="highs")
        x, fun = planner._solve(limit)
        assert ref.status == 0 and np.array_equal(x, ref.x) and fun == ref.fun
    b = planner.b0.copy()
    b[planner.n_edges:] += t_max * 0.5
    assert linprog(planner.cost, A_ub=planner.A, b_ub=b, bounds=planner.bounds, method="highs").status == 2
    with pytest.raises(ValueError, match="no plan meets"):
        planner._solve(t_max * 0.5)


def test_real_time_plans_on_forked_workers_are_the_same(tmp_path, gpt3_a100):
    """The gap plans' linear programs on two forked workers give the plans this process gives.

    In a fresh interpreter, to see that the parent never ran HiGHS and that a process where
    HiGHS started threads never forks.
    """
    code = f"""
import os, sys
import numpy as np
import zeus_plugins_perseus.exact as exact
from zeus_plugins_perseus.planner import plan_frontier
from zeus_plugins_perseus.profile import read_profile
prof = read_profile({str(gpt3_a100)!r})
forked = plan_frontier(prof, 8, 6, "1f1b", 0.001, 83.64, workers=2)
assert exact._highs_threads is None, "the parent ran HiGHS itself"
assert os.times().children_user > 0, "no worker ran"
here = plan_frontier(prof, 8, 6, "1f1b", 0.001, 83.64, workers=1)
assert exact._highs_threads is not None
exact._highs_threads = True
assert exact._workers(None, 5, 2) == 1, "forked after HiGHS started threads here"
for key in ("frequencies", "time_units", "planned_energy_j", "emulated_time_s", "emulated_energy_j"):
    assert np.array_equal(getattr(forked, key), getattr(here, key)), key
print("same", len(here))
"""
    import subprocess

    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("same ")


@pytest.mark.parametrize("fate", ["raise", "kill"])
def test_a_worker_that_fails_or_dies_ends_planning_with_an_error(tmp_path, fate):
    """A worker's exception reaches the caller as it is; a worker killed mid-plan (the OOM killer)
    ends the wait with an error naming the way out, instead of waiting for it forever."""
    code = f"""
import os, signal
import zeus_plugins_perseus.exact as exact

class Planner:  # what plan_many needs of an ExactPlanner
    n = 10_000
    def plan(self, limit, greedy_reclaim=True):
        if limit == 2.0:
            if {fate!r} == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise ValueError("no plan meets 2.000000 s")
        return [int(limit)]

try:
    exact.plan_many(Planner(), [1.0, 2.0, 3.0], [True, False, False], workers=2)
except Exception as e:
    print(type(e).__name__, e)
"""
    import subprocess

    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    if fate == "raise":
        assert r.stdout.startswith("ValueError no plan meets 2.000000 s"), r.stdout
    else:
        assert r.stdout.startswith("RuntimeError a process planning the real-time plans ended"), r.stdout
        assert "max_gap_plans" in r.stdout


def test_planning_does_not_import_scipy_optimize(tmp_path, gpt3_a100):
    """HiGHS' module is loaded on its own (scipy.optimize's import is a third of a second); scipy still works after."""
    code = f"""
import sys
from zeus_plugins_perseus.planner import plan_frontier
from zeus_plugins_perseus.profile import read_profile
ps = plan_frontier(read_profile({str(gpt3_a100)!r}), 8, 4, "1f1b", 0.001, 83.64, workers=1)
assert "scipy.optimize" not in sys.modules, "scipy.optimize was imported"
core = sys.modules["scipy.optimize._highspy._core"]
from scipy.optimize import linprog
import scipy.optimize._highspy._core as again
assert again is core
assert linprog([1, 1], A_ub=[[-1, -1]], b_ub=[-1], method="highs").status == 0
print("ok", len(ps))
"""
    import subprocess

    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok ")
