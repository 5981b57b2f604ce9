"""Slack reclamation: never slower, never costlier, and no single op left that could run slower for free."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perseus_fakes import two_stage_rows  # noqa: E402

from zeus_core import pareto_frontier  # noqa: E402
from zeus_plugins_perseus.clock_options import fastest_frequencies  # noqa: E402
from zeus_plugins_perseus.dag_times import (  # noqa: E402
    DagLinks,
    FloatTimeline,
    earliest_finish,
    iteration_time,
    latest_finish,
    topological_order,
)
from zeus_plugins_perseus.emulator import emulate, measured_tables  # noqa: E402
from zeus_plugins_perseus.planner import plan_frontier  # noqa: E402
from zeus_plugins_perseus.profile import InstructionProfile, read_profile  # noqa: E402
from zeus_plugins_perseus.reclaim import OnePlanPasses, reclaim_slack  # noqa: E402
from zeus_plugins_perseus.schedule import build_dag  # noqa: E402

BLOCKING = 60.0
CLOCKS = np.array([1410, 1200, 1000, 800])


def _float_left(dag, prof, freqs):
    """Per op: can it take its next slower effective-energy Pareto option without lengthening the iteration?"""
    times, _ = measured_tables(dag, prof, freqs[None])
    times = times[0]
    order = topological_order(dag.n_ops, dag.edges)
    preds = [[] for _ in range(dag.n_ops)]
    succs = [[] for _ in range(dag.n_ops)]
    for a, b in dag.edges.tolist():
        preds[b].append(a)
        succs[a].append(b)
    ef = np.zeros(dag.n_ops)
    for v in order:
        ef[v] = max((ef[p] for p in preds[v]), default=0.0) + times[v]
    T = ef.max()
    lf = np.zeros(dag.n_ops)
    for v in reversed(order):
        lf[v] = min((lf[w] - times[w] for w in succs[v]), default=T)
    free = []
    for i, op in enumerate(dag.ops):
        o = prof.get(op.stage, op.instruction)
        eff = o.energy - BLOCKING * o.time
        front = pareto_frontier(o.time, eff)
        t_front, f_front = o.time[front], o.frequency[front]
        k = int(np.flatnonzero(f_front == freqs[i])[0]) if freqs[i] in f_front else None
        if k is not None and k + 1 < len(front) and t_front[k + 1] - t_front[k] < lf[i] - ef[i] - 1e-9:
            free.append(i)
    return free


def test_random_plans_get_cheaper_never_slower_and_leave_no_free_float():
    prof = InstructionProfile.from_rows(two_stage_rows())
    dag = build_dag("1f1b", 2, 4)
    rng = np.random.default_rng(7)
    plans = CLOCKS[rng.integers(0, len(CLOCKS), size=(300, dag.n_ops))]
    t0, e0 = emulate(dag, prof, plans, BLOCKING)
    out = reclaim_slack(dag, prof, plans, BLOCKING)
    t1, e1 = emulate(dag, prof, out, BLOCKING)
    assert np.all(t1 <= t0)  # never slower: exact, no tolerance
    assert np.all(e1 <= e0 + 1e-9)
    assert np.mean(e1 < e0 - 1e-9) > 0.5  # random plans waste float; most get cheaper
    for k in range(0, 300, 30):
        assert _float_left(dag, prof, out[k]) == []


def test_all_max_plan_slows_only_the_light_stage():
    prof = InstructionProfile.from_rows(two_stage_rows())
    dag = build_dag("gpipe", 2, 3)
    fmax = np.full(dag.n_ops, 1410)
    out = reclaim_slack(dag, prof, fmax[None], BLOCKING)[0]
    t0, e0 = emulate(dag, prof, fmax[None], BLOCKING)
    t1, e1 = emulate(dag, prof, out[None], BLOCKING)
    assert t1[0] <= t0[0] and e1[0] < e0[0]
    stage = np.array([op.stage for op in dag.ops])
    assert np.all(out[stage == 0] == 1410)  # stage 0 is the critical path: left alone
    assert np.any(out[stage == 1] < 1410)  # stage 1 (0.6x the work) takes its float


def test_measured_frontier_reaches_the_fastest_clocks_of_a_noisy_profile(perseus_data):
    # On BLOOM / A40 a lower clock is faster than the highest for some instructions: the
    # frontier must start at the critical path of every op at its fastest measured clock,
    # below all-max clocks (rounded-up quantised plans alone stop short of it).
    prof = read_profile(perseus_data / "bloom+a40_bf16.csv")
    ps = plan_frontier(prof, 8, 4, "1f1b", 0.001, 70.38)
    dag = build_dag("1f1b", 8, 4)
    t_fast, _ = emulate(dag, prof, fastest_frequencies(dag, prof)[None], 70.38)
    assert t_fast[0] < ps.max_freq_time_s
    assert ps.emulated_time_s[0] == t_fast[0]
    assert np.all(np.diff(ps.emulated_time_s) > 0) and np.all(np.diff(ps.emulated_energy_j) < 0)


def test_fastest_frequencies_pick_the_shortest_measured_time():
    rows = [r if not (r[0] == 0 and r[1] == "backward" and r[2] == 1200) else (0, "backward", 1200, 0.038, r[4]) for r in two_stage_rows()]
    prof = InstructionProfile.from_rows(rows)
    dag = build_dag("1f1b", 2, 2)
    want = [1200 if (op.stage, op.instruction) == (0, "backward") else 1410 for op in dag.ops]
    assert fastest_frequencies(dag, prof).tolist() == want


def test_default_model_never_worse_than_published_model(gpt3_a100):
    prof = read_profile(gpt3_a100)
    meas = plan_frontier(prof, 8, 12, "1f1b", 0.001, 83.64)
    pub = plan_frontier(prof, 8, 12, "1f1b", 0.001, 83.64, model="exponential")
    for t, e in zip(pub.emulated_time_s, pub.emulated_energy_j):
        ok = meas.emulated_energy_j[meas.emulated_time_s <= t]
        assert ok.size and ok.min() <= e * (1 + 1e-9), f"published plan at {t:.4f} s, {e:.2f} J beats every measured plan"


def test_a_clock_the_profile_lacks_is_named():
    prof = InstructionProfile.from_rows(two_stage_rows())
    dag = build_dag("1f1b", 2, 2)
    plan = np.full(dag.n_ops, 1410)
    plan[0] = 1300
    with pytest.raises(KeyError, match="stage 0 forward was not profiled at 1300 MHz"):
        reclaim_slack(dag, prof, plan[None], BLOCKING)


def _greedy_by_full_passes(lv, op_t, op_e, op_count, choice, limit):
    """The greedy pass written plainly: every op's float recomputed over the whole DAG before each step."""
    choice = choice.copy()
    n = len(choice)
    rows = np.arange(n)

    def timeline():
        t = op_t[rows, choice]
        return earliest_finish(lv, t)[:n], latest_finish(lv, t, limit)[:n]

    ef, lf = timeline()
    blocked = np.zeros(n, dtype=bool)
    last = op_t.shape[1] - 1
    while True:
        nxt = np.minimum(choice + 1, last)
        fits = ~blocked & (choice + 1 < op_count) & (op_t[rows, nxt] - op_t[rows, choice] <= lf - ef)
        gain = np.where(fits, op_e[rows, choice] - op_e[rows, nxt], -np.inf)
        best = int(np.argmax(gain))
        if not gain[best] > 0.0:
            return choice
        choice[best] += 1
        new_ef, new_lf = timeline()
        if new_ef.max() > limit:
            choice[best] -= 1
            blocked[best] = True
            continue
        ef, lf = new_ef, new_lf


def _repair_by_full_passes(lv, op_t, op_e, choice, limit):
    """The repair written plainly: speed up the cheapest late critical op, every time recomputed before each step."""
    choice = choice.copy()
    n = len(choice)
    rows = np.arange(n)
    while True:
        t = op_t[rows, choice]
        ef, lf = earliest_finish(lv, t)[:n], latest_finish(lv, t, limit)[:n]
        if ef.max() <= limit:
            return choice
        late = np.flatnonzero((ef > lf) & (choice > 0))
        c = choice[late]
        choice[late[np.argmin((op_e[late, c - 1] - op_e[late, c]) / (op_t[late, c] - op_t[late, c - 1]))]] -= 1


def test_incremental_timeline_is_bit_for_bit_the_full_passes():
    """FloatTimeline after each change: exactly the earliest / latest finishes of a full pass; a change that
    would end past the limit is refused and changes nothing."""
    dag = build_dag("1f1b", 4, 6)
    lv = dag.levels
    rng = np.random.default_rng(3)
    times = rng.uniform(0.01, 0.05, dag.n_ops)
    limit = float(iteration_time(lv, times)) * 1.02
    tl = FloatTimeline(DagLinks(lv), times, limit)
    refused = 0
    for _ in range(400):
        op = int(rng.integers(dag.n_ops))
        new = float(times[op] * rng.uniform(0.7, 1.6))
        before = (list(tl.ef), list(tl.lf))
        if tl.set_time(op, new):
            times[op] = new
        else:
            refused += 1
            assert (tl.ef, tl.lf) == before
        assert tl.ef == earliest_finish(lv, times)[: dag.n_ops].tolist()
        assert tl.lf == latest_finish(lv, times, limit)[: dag.n_ops].tolist()
        assert tl.end() <= limit
    assert 0 < refused < 400


@pytest.mark.parametrize("case", ["two-stage", "gpt3"])
def test_greedy_pass_takes_the_steps_of_full_recomputation(case, gpt3_a100):
    """OnePlanPasses.greedy (a heap and incremental finish times) gives the plan of the plain greedy pass, and
    its repair the plan of speeding up the cheapest late op with every time recomputed."""
    from zeus_plugins_perseus.exact import ExactPlanner

    if case == "gpt3":
        prof, dag, blocking = read_profile(gpt3_a100), build_dag("1f1b", 8, 4), 83.64
    else:
        prof, dag, blocking = InstructionProfile.from_rows(two_stage_rows()), build_dag("1f1b", 2, 4), BLOCKING
    ex = ExactPlanner(dag, prof, blocking)
    passes = OnePlanPasses(ex.levels, ex.op_t, ex.op_e, ex.op_count)
    rng = np.random.default_rng(11)
    rows = np.arange(dag.n_ops)
    t_fast = float(iteration_time(ex.levels, ex.op_t[:, 0]))
    for _ in range(6):
        limit = t_fast * rng.uniform(1.0, 1.08)
        choice = rng.integers(0, ex.op_count)  # random options: usually over the limit, so repaired first
        repaired, _ = passes.repair(choice, limit)
        assert repaired.tolist() == _repair_by_full_passes(ex.levels, ex.op_t, ex.op_e, choice, limit).tolist()
        assert float(iteration_time(ex.levels, ex.op_t[rows, repaired])) <= limit
        want = _greedy_by_full_passes(ex.levels, ex.op_t, ex.op_e, ex.op_count, repaired, limit)
        got = passes.greedy(repaired, limit)
        assert got.tolist() == want.tolist()
        assert (got != repaired).any()  # the case does spend float
