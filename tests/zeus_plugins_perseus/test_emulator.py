import numpy as np
import pytest

from zeus_plugins_perseus.emulator import emulate, measured_tables, timeline
from zeus_plugins_perseus.profile import InstructionProfile
from zeus_plugins_perseus.schedule import build_dag


def profile(stages, fwd=(1.0, 1.0), bwd=(2.0, 3.0), slow=(500, 1.5)):
    rows = []
    for s in range(stages):
        rows += [(s, "forward", 1000, *fwd), (s, "backward", 1000, *bwd)]
        rows += [(s, "forward", slow[0], fwd[0] * slow[1], fwd[1] * 0.8), (s, "backward", slow[0], bwd[0] * slow[1], bwd[1] * 0.8)]
    return InstructionProfile.from_rows(rows)


def test_two_stages_one_microbatch_by_hand():
    dag = build_dag("1f1b", 2, 1)
    p = InstructionProfile.from_rows(
        [
            (0, "forward", 1000, 1.0, 10.0),
            (0, "backward", 1000, 2.0, 20.0),
            (1, "forward", 1000, 0.5, 5.0),
            (1, "backward", 1000, 1.5, 12.0),
        ]
    )
    t, e = emulate(dag, p, np.full((1, dag.n_ops), 1000), blocking_power_w=2.0)
    # F(0) 1 -> F(1) 0.5 -> B(1) 1.5 -> B(0) 2 ; energy 47 J computing + 2 W x (2 x 5 s - 5 s busy)
    assert t[0] == pytest.approx(5.0)
    assert e[0] == pytest.approx(47.0 + 2.0 * 5.0)


def test_two_stages_two_microbatches_by_hand():
    dag = build_dag("1f1b", 2, 2)
    p = profile(2)
    t, e = emulate(dag, p, np.full((1, dag.n_ops), 1000), blocking_power_w=10.0)
    # stage 0: F0 [0,1] F1 [1,2] B0 [4,6] B1 [7,9]; stage 1: F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7]
    assert t[0] == pytest.approx(9.0)
    assert e[0] == pytest.approx(4 * 1.0 + 4 * 3.0 + 10.0 * (2 * 9.0 - 12.0))
    times, _ = measured_tables(dag, p, np.full((1, dag.n_ops), 1000))
    start, finish = timeline(dag, times[0])
    got = {(dag.ops[i].stage, dag.ops[i].label): (start[i], finish[i]) for i in range(dag.n_ops)}
    assert got[(0, "B1")] == (7.0, 9.0) and got[(1, "F1")] == (4.0, 5.0) and got[(0, "B0")] == (4.0, 6.0)


def test_slowing_an_off_critical_forward_is_free_in_time():
    dag = build_dag("1f1b", 2, 2)
    p = profile(2)
    base = np.full(dag.n_ops, 1000)
    plan = base.copy()
    # stage 0's F1 ends at 2 but stage 1 only needs it at 4: 1.5 s instead of 1 s costs no time
    plan[dag.index()[(0, "forward", 1)]] = 500
    t, e = emulate(dag, p, np.vstack([base, plan]), blocking_power_w=10.0)
    assert t[1] == pytest.approx(t[0])
    # 0.2 J less compute, and 0.5 s more busy time means 0.5 s x 10 W less blocking energy
    assert e[0] - e[1] == pytest.approx(0.2 + 5.0)


def test_unprofiled_clock_is_named():
    dag = build_dag("1f1b", 2, 1)
    with pytest.raises(KeyError, match="not profiled at 700 MHz"):
        emulate(dag, profile(2), np.full((1, dag.n_ops), 700), 0.0)
