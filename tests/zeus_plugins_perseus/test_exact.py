"""The real-time plan at a limit: exactly meets it on the measured profile, and spends the slack."""

import itertools
import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perseus_fakes import two_stage_rows  # noqa: E402

from zeus_plugins_perseus.clock_options import EffectiveOptions  # noqa: E402
from zeus_plugins_perseus.dag_times import longest_path  # noqa: E402
from zeus_plugins_perseus.emulator import emulate  # noqa: E402
from zeus_plugins_perseus.exact import ExactPlanner, exact_plan  # noqa: E402
from zeus_plugins_perseus.hull_flow import UNIT_S, HullFlow  # noqa: E402
from zeus_plugins_perseus.planner import plan_frontier  # noqa: E402
from zeus_plugins_perseus.profile import InstructionProfile, read_profile  # noqa: E402
from zeus_plugins_perseus.schedule import Op, PipelineDAG, build_dag  # noqa: E402

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


def _random_case(rng, n):
    """A random DAG of ``n`` ops (several sources and sinks) and random options per op."""
    edges = [(a, b) for a in range(n) for b in range(a + 1, n) if rng.random() < 0.35]
    ops = tuple(Op(0, "forward", i) for i in range(n))
    dag = PipelineDAG(schedule="random", stages=1, microbatches=n, ops=ops, edges=np.asarray(edges, dtype=np.int64).reshape(-1, 2))
    opts = []
    for _ in range(n):
        k = int(rng.integers(1, 7))
        t = np.sort(rng.uniform(0.01, 0.2, k))
        e = rng.uniform(1.0, 30.0, k)
        opts.append(EffectiveOptions(t, e, np.arange(k, 0, -1) * 100, blocking_w=float(rng.uniform(0, 50))))
    return dag, opts


def _lp_energy(dag, opts, limit):
    """The hull LP written out independently (variables: start and duration per op, and a hull bound per
    segment), solved by scipy's HiGHS: least sum of hull energies with every op finished by ``limit``."""
    from scipy.optimize import linprog

    n = dag.n_ops
    # variables: s_0..s_{n-1}, d_0..d_{n-1}, y_0..y_{n-1} (y_i >= each hull segment's line at d_i)
    c = np.concatenate([np.zeros(2 * n), np.ones(n)])
    rows, b = [], []
    for a, z in dag.edges.tolist():  # s_a + d_a - s_z <= 0
        r = np.zeros(3 * n)
        r[a], r[n + a], r[z] = 1, 1, -1
        rows.append(r)
        b.append(0.0)
    for i in range(n):  # s_i + d_i <= limit
        r = np.zeros(3 * n)
        r[i], r[n + i] = 1, 1
        rows.append(r)
        b.append(limit)
    bounds = [(0, None)] * n + [(o.hull_t[0], o.hull_t[-1]) for o in opts] + [(None, None)] * n
    for i, o in enumerate(opts):
        for k in range(len(o.hull_t) - 1):  # y_i >= e_k + slope (d_i - t_k)
            slope = (o.hull_e[k + 1] - o.hull_e[k]) / (o.hull_t[k + 1] - o.hull_t[k])
            r = np.zeros(3 * n)
            r[n + i], r[2 * n + i] = slope, -1
            rows.append(r)
            b.append(slope * o.hull_t[k] - o.hull_e[k])
        if len(o.hull_t) == 1:  # y_i >= e_0
            r = np.zeros(3 * n)
            r[2 * n + i] = -1
            rows.append(r)
            b.append(-o.hull_e[0])
    res = linprog(c, A_ub=np.array(rows), b_ub=np.array(b), bounds=bounds, method="highs")
    assert res.status == 0, res.message
    return res.fun


@pytest.mark.parametrize("seed", range(3))
def test_the_flow_solves_the_lp_on_small_random_dags(seed):
    """At every limit from the slowest to the fastest critical path, the parametric flow's hull energy is
    the LP's, and both canonical solutions are feasible plans of that energy; asking for the limits in one
    walk or one by one (another starting flow) gives the same canonical solutions."""
    rng = np.random.default_rng(seed)
    for _ in range(8):
        dag, opts = _random_case(rng, int(rng.integers(2, 9)))
        flow = HullFlow(dag, opts)
        lo, hi = flow.t_min, max(flow.t_max, flow.t_min + 1)
        limits = sorted({int(x) for x in np.linspace(lo, hi + (hi - lo) // 5, 7)}, reverse=True)
        walked = list(flow.solve(limits))
        for sol, lim in zip(walked, limits):
            want = _lp_energy(dag, opts, lim * UNIT_S)
            assert sol.hull_energy == pytest.approx(want, rel=1e-7, abs=1e-6)
            for d in (sol.earliest, sol.latest):
                assert longest_path(dag.n_ops, dag.edges, d) <= lim
                assert flow.hull_energy(d) == pytest.approx(want, rel=1e-7, abs=1e-6)
            alone = next(flow.solve([lim]))
            assert np.array_equal(alone.earliest, sol.earliest) and np.array_equal(alone.latest, sol.latest)


def test_a_wrong_flow_model_fails_the_lp_comparison():
    """The comparison above sees a flow that drops the hulls' convexity (every segment priced as the first)."""
    rng = np.random.default_rng(11)
    differs = False
    for _ in range(6):
        dag, opts = _random_case(rng, 6)
        flow = HullFlow(dag, opts)
        cols = np.arange(flow.G.shape[1])[None, :]
        flow.G = np.where(cols < flow.K[:, None], flow.G[:, :1], 0)
        flow.G_up = np.where(cols == 0, flow.G_up, np.roll(flow.G, 1, axis=1))
        lims = sorted({flow.t_min + (flow.t_max - flow.t_min) * k // 4 for k in (3, 2, 1)}, reverse=True)
        got = [s.hull_energy for s in flow.solve(lims)]
        want = [_lp_energy(dag, opts, lim * UNIT_S) for lim in lims]
        differs |= not np.allclose(got, want, rtol=1e-7)
    assert differs


def test_every_real_time_plan_at_least_as_good_as_the_cold_lp_plan_here(gpt3_a100):
    """GPT-3 / A100 at 8 x 6: at each real-time limit the listed frontier has a plan at least as fast as
    the limit and no costlier than the cold HiGHS plan of that limit (mapped and reclaimed as before)."""
    from zeus_plugins_perseus.reclaim import reclaim_slack

    prof = read_profile(gpt3_a100)
    ps = plan_frontier(prof, 8, 6, "1f1b", 0.001, 83.64, workers=1)
    dag, planner = ps.dag, ExactPlanner(ps.dag, prof, 83.64)
    limits = ps.real_time_limits_s.tolist()
    rows = np.arange(dag.n_ops)
    for k, lim in enumerate(limits):
        dur, _ = planner.lp.solve(lim)
        choice = planner.repair(np.maximum((planner.op_t <= (dur + 1e-9)[:, None]).sum(axis=1) - 1, 0), lim)
        cold = planner.finish(choice, lim) if k == 0 else reclaim_slack(dag, prof, planner.op_f[rows, choice][None], 83.64)[0]
        t, e = emulate(dag, prof, cold[None], 83.64)
        ok = ps.emulated_energy_j[ps.emulated_time_s <= lim * (1 + 1e-12)]
        assert ok.size and ok.min() <= e[0] + 1e-9, f"limit {lim:.5f}: {ok.min():.3f} J > cold LP's {e[0]:.3f} J"


def test_a_plan_is_handed_on_to_slower_limits_where_it_saves(gpt3_a100):
    """The canonical rule's last step: at each limit (fastest first) the plan is at most what the next faster
    limit's plan costs given this limit's float, never more than the best of the limit's own four, and meets
    the limit. On this profile the step lowers some limit's plan, so a rule without it fails here."""
    prof = read_profile(gpt3_a100)
    dag = build_dag("1f1b", 8, 12)
    planner = ExactPlanner(dag, prof, 83.64)
    limits = list(np.linspace(planner.t_fastest, planner.t_fastest * 1.004, 8))
    sols = planner.solutions(limits)
    plans = planner.plans(limits)
    t, e = emulate(dag, prof, plans, 83.64)
    assert (t <= np.array(limits) * (1 + 1e-12)).all()
    own = np.array([planner.plans_from([[sols[lim].earliest, sols[lim].latest]], [lim])[0] for lim in limits])
    _, e_own = emulate(dag, prof, own, 83.64)
    assert (e <= e_own + 1e-9).all()
    assert (e < e_own - 1e-6).any()
    rows = np.arange(dag.n_ops)
    for k in range(1, len(limits)):
        handed = planner.op_f[rows, planner.passes.greedy(planner.choice_of(plans[k - 1]), limits[k])]
        (th,), (eh,) = emulate(dag, prof, handed[None], 83.64)
        assert th <= limits[k] * (1 + 1e-12)
        assert e[k] <= eh + 1e-9, f"limit {k}: {e[k]:.3f} J, the faster limit's plan given its float {eh:.3f} J"


def test_plans_are_the_same_with_or_without_a_worker(gpt3_a100):
    """The worker process (HiGHS check, half the greedy passes) changes no plan."""
    prof = read_profile(gpt3_a100)
    here = plan_frontier(prof, 8, 4, "1f1b", 0.001, 83.64, workers=1)
    there = plan_frontier(prof, 8, 4, "1f1b", 0.001, 83.64, workers=2)
    for key in ("frequencies", "time_units", "emulated_time_s", "emulated_energy_j"):
        assert np.array_equal(getattr(here, key), getattr(there, key)), key


def test_meanwhile_runs_once_between_the_quantised_frontier_and_the_shared_work(gpt3_a100, monkeypatch):
    """``meanwhile`` (the policy's matplotlib import) runs once in the planning process, after the quantised
    frontier is solved and before the shared checks and reclamation; it changes no plan."""
    from zeus_plugins_perseus import planner

    prof = read_profile(gpt3_a100)
    without = plan_frontier(prof, 8, 4, "1f1b", 0.001, 83.64, workers=1)
    seen = []
    solve, checks = planner._solve, planner.claimed_checks
    monkeypatch.setattr(planner, "_solve", lambda *a: (seen.append("solve"), solve(*a))[1])
    monkeypatch.setattr(planner, "claimed_checks", lambda *a: (seen.append("checks"), checks(*a))[1])
    with_it = plan_frontier(prof, 8, 4, "1f1b", 0.001, 83.64, workers=1, meanwhile=lambda: seen.append("meanwhile"))
    assert seen == ["solve", "meanwhile", "checks"]
    assert np.array_equal(with_it.frequencies, without.frequencies)


def test_the_quantised_walk_starts_near_the_least_energy_plan_only_where_that_is_safe(gpt3_a100, monkeypatch):
    """The measured model's quantised walk starts near its least-energy plan (fewer phases, the same plans); where
    the price of time it starts at leaves too little margin over the model's rounding (here: a start priced above
    the blocking power), it walks from the all-slowest time: the plans are the same again."""
    from zeus_plugins_perseus import tradeoff

    prof = read_profile(gpt3_a100)
    near = plan_frontier(prof, 8, 4, "1f1b", 0.001, 83.64, workers=1)
    monkeypatch.setattr(tradeoff, "START_DISCOUNT", 3.0)
    full = plan_frontier(prof, 8, 4, "1f1b", 0.001, 83.64, workers=1)
    assert near.phases < full.phases
    assert np.array_equal(near.frequencies, full.frequencies)
    assert np.array_equal(near.emulated_energy_j, full.emulated_energy_j)


def test_the_policys_worker_has_imported_the_planner_before_its_first_call():
    """The policy's worker imports the planner as it starts (``at_start``), not when a call needs it: its first call
    (from a module that imports no planner) finds it imported."""
    from perseus_fakes import imported

    from zeus_plugins_perseus.background import Background, Imports, planner_worker

    with planner_worker() as bg:
        assert bg.submit(imported, "zeus_plugins_perseus.planner").result()
    with Background(workers=2, at_start=Imports(("json",))) as bg:  # without it, nothing imports the planner there
        assert not bg.submit(imported, "zeus_plugins_perseus.planner").result()


def test_a_call_the_worker_cannot_load_is_an_error_naming_why_and_the_worker_goes_on():
    from perseus_fakes import FailsToUnpickle

    from zeus_plugins_perseus.background import Background

    with Background(workers=2) as bg:
        with pytest.raises(RuntimeError, match="could not load its call: ImportError.*zeus_missing_module"):
            bg.submit(FailsToUnpickle()).result()
        assert bg.submit(max, 3, 4).result() == 4


def test_a_worker_reads_calls_before_it_unpickles_its_start_call(tmp_path):
    """The worker's ``at_start`` call (the planner's imports) may take long to unpickle; meanwhile a call larger
    than a pipe holds must not block the caller: here the start call is unpickled only once the caller's submit
    has returned, so a worker that unpickled it before reading its calls would deadlock."""
    import threading

    from perseus_fakes import UnpicklesSlowly

    from zeus_plugins_perseus.background import Background

    gate = tmp_path / "submitted"
    bg = Background(workers=2, at_start=UnpicklesSlowly(str(gate)))
    bg.start()
    big = np.arange(1_000_000)  # 8 MB: far more than a pipe's 64 KiB
    done = []
    caller = threading.Thread(target=lambda: done.append(bg.submit(np.sum, big)))
    caller.start()
    caller.join(60)
    try:
        assert done, "submit blocked until the worker had unpickled its start call"
        gate.touch()
        assert done[0].result() == big.sum()
    finally:
        gate.touch()
        bg.kill()
        caller.join(10)
        bg.__exit__(None, None, None)


def _exit_hard():
    os.kill(os.getpid(), signal.SIGKILL)


def _raise():
    raise ValueError("no plan meets 2.000000 s")


def test_a_worker_that_fails_or_dies_ends_the_wait_with_an_error():
    from zeus_plugins_perseus.background import Background, WorkerDied

    with Background(workers=2) as bg:
        with pytest.raises(ValueError, match="no plan meets 2.000000 s"):
            bg.submit(_raise).result()
        assert bg.submit(max, 3, 4).result() == 4  # the worker goes on after a call that raised
    with Background(workers=2) as bg:
        r = bg.submit(_exit_hard)
        with pytest.raises(WorkerDied, match="ended without an answer"):
            r.result()


def test_no_private_highs_module_and_no_scipy_optimize(tmp_path, gpt3_a100):
    """HiGHS comes from its public package; planning imports neither scipy.optimize nor scipy's HiGHS copy."""
    import subprocess

    package = Path(ExactPlanner.__module__.replace(".", "/")).parent
    for f in (Path(__file__).resolve().parents[2] / "zeus_plugins_perseus" / package).rglob("*.py"):
        text = f.read_text()
        assert "_highspy" not in text and "sys.modules[" not in text, f
    code = f"""
import sys
from zeus_plugins_perseus.planner import plan_frontier
from zeus_plugins_perseus.profile import read_profile
ps = plan_frontier(read_profile({str(gpt3_a100)!r}), 8, 4, "1f1b", 0.001, 83.64, workers=1)
assert "scipy.optimize" not in sys.modules, "scipy.optimize was imported"
assert "highspy" in sys.modules
print("ok", len(ps))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok ")


def test_the_chosen_limit_is_checked_against_a_cold_lp():
    """A deadline's limit is planned from a cold HiGHS LP too; where that plan beats every listed one meeting the
    deadline it is listed and chosen (here it does, on a 2-stage pipeline mid-frontier), and drops only the
    plans it beats."""
    from perseus_fakes import stage_rows

    prof = InstructionProfile.from_rows(stage_rows((1.0, 0.6)))
    plain = plan_frontier(prof, 2, 4, "1f1b", 0.001, BLOCKING)
    deadline = float(plain.emulated_time_s[len(plain) // 2])
    checked = plan_frontier(prof, 2, 4, "1f1b", 0.001, BLOCKING, deadline_s=deadline)
    _, (cold,) = emulate(checked.dag, prof, ExactPlanner(checked.dag, prof, BLOCKING).highs_plan(deadline)[None], BLOCKING)
    k_plain, k = plain.choose(deadline_s=deadline), checked.choose(deadline_s=deadline)
    assert checked.emulated_time_s[k] <= deadline and checked.emulated_energy_j[k] <= cold
    assert checked.emulated_energy_j[k] < plain.emulated_energy_j[k_plain]
    listed = {tuple(f) for f in checked.frequencies.tolist()}
    assert listed - {tuple(f) for f in plain.frequencies.tolist()} == {tuple(checked.frequencies[k].tolist())}
    for f, t, e in zip(plain.frequencies.tolist(), plain.emulated_time_s, plain.emulated_energy_j):
        if tuple(f) not in listed:  # dropped only where the checked plan beats it
            assert checked.emulated_time_s[k] <= t and checked.emulated_energy_j[k] <= e
    same = plan_frontier(prof, 2, 4, "1f1b", 0.001, BLOCKING, max_slowdown=1.0)  # the zero-slowdown check only
    assert np.array_equal(same.frequencies, plain.frequencies)
