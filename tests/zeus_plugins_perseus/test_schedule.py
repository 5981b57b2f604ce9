import itertools

import numpy as np
import pytest

from zeus_plugins_perseus.dag_times import CycleError, topological_order
from zeus_plugins_perseus.schedule import build_dag, one_f_one_b_order


def labels(dag, stage):
    return " ".join(dag.ops[i].label for i in dag.stage_ops(stage))


def test_1f1b_order_matches_published_example():
    dag = build_dag("1f1b", 4, 8)
    assert labels(dag, 0) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7"
    assert labels(dag, 3) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"
    assert labels(dag, 1) == "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7"


def test_more_stages_than_microbatches():
    assert one_f_one_b_order(4, 2, 0) == [("forward", 0), ("forward", 1), ("backward", 0), ("backward", 1)]


def test_gpipe_order():
    dag = build_dag("gpipe", 3, 4)
    for s in range(3):
        assert labels(dag, s) == "F0 F1 F2 F3 B3 B2 B1 B0"


@pytest.mark.parametrize("schedule, S, M", list(itertools.product(["1f1b", "gpipe"], [1, 2, 3, 8], [1, 2, 5, 12])))
def test_shape_and_dependencies(schedule, S, M):
    dag = build_dag(schedule, S, M)
    assert dag.n_ops == 2 * S * M
    # program order + one forward and one backward hop per microbatch between neighbours
    assert len(dag.edges) == S * (2 * M - 1) + 2 * (S - 1) * M
    idx = dag.index()
    edges = set(map(tuple, dag.edges.tolist()))
    for s in range(S - 1):
        for j in range(M):
            assert (idx[(s, "forward", j)], idx[(s + 1, "forward", j)]) in edges
            assert (idx[(s + 1, "backward", j)], idx[(s, "backward", j)]) in edges
    for s in range(S):
        ops = dag.stage_ops(s)
        assert all((a, b) in edges for a, b in zip(ops, ops[1:]))
        # every microbatch once forward and once backward, forward first
        order = [(dag.ops[i].instruction, dag.ops[i].microbatch) for i in ops]
        for j in range(M):
            assert order.index(("forward", j)) < order.index(("backward", j))
    order = topological_order(dag.n_ops, dag.edges)
    pos = np.empty(dag.n_ops, int)
    pos[order] = np.arange(dag.n_ops)
    assert all(pos[a] < pos[b] for a, b in dag.edges)
    # single entry (stage 0's first forward) and single exit (stage 0's last backward)
    assert set(range(dag.n_ops)) - set(dag.edges[:, 1].tolist()) == {idx[(0, "forward", 0)]}
    last = dag.stage_ops(0)[-1]
    assert set(range(dag.n_ops)) - set(dag.edges[:, 0].tolist()) == {last}


def test_published_dag_size():
    # 8 x 12 has 192 instructions and 352 edges (the published graph adds a source and a sink edge)
    dag = build_dag("1f1b", 8, 12)
    assert (dag.n_ops, len(dag.edges)) == (192, 352)


def test_bad_schedule_and_cycle():
    with pytest.raises(ValueError, match="schedule must be one of"):
        build_dag("zb", 2, 2)
    with pytest.raises(ValueError, match=">= 1"):
        build_dag("1f1b", 0, 2)
    with pytest.raises(CycleError, match="cycle through operation"):
        topological_order(3, [(0, 1), (1, 2), (2, 0)])
