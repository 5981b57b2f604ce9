"""What the ranks of one job say to each other (``zeus_core.engine.ranks``, ``zeus_core.inloop``),
with ranks as threads of this process (``inloop_helpers.ThreadGroup``), each on its own simulated GPU:
rank 0 decides, the others follow step by step, measurements are combined, mismatches are refused.
``tests/zeus_plugins_torch/test_torchrun.py`` runs the same through torchrun."""

from __future__ import annotations

import contextlib
import threading

import pytest
from inloop_helpers import QUICK_JIT, ThreadGroup, fake_gpus, limits, run_ranks, spin

from zeus_core import BatchSizeOptimizer, Measurement, PowerLimitOptimizer, ZeusMonitor
from zeus_core.engine.ranks import Follower, LeaderFailed, ProtocolError, combine_measurements, lead
from zeus_core.engine.registry import get_registry
from zeus_core.engine.stores.locations import open_store


@pytest.fixture
def gpus(tmp_path, monkeypatch):
    return fake_gpus(tmp_path / "nvml.json", monkeypatch, gpus=2)


def test_every_rank_follows_rank_0s_limit_at_every_step_and_epochs_are_summed(gpus):
    lock = threading.Lock()  # ZeusMonitor construction reads the journal; one rank at a time here

    def rank(g):
        with lock:
            mon = ZeusMonitor(gpu_indices=[g.rank], cpu_indices=[])
        seen = []
        own = []
        with mon, PowerLimitOptimizer(mon, "jit", job="ranks", options=QUICK_JIT, group=g) as plo:
            assert plo.max_power_w == 800.0  # both GPUs' maximum: the cost metric of the whole job
            for _ in range(2):
                mon.begin_window("epoch")
                plo.on_epoch_begin()
                for _ in range(150):
                    plo.on_step_begin()
                    seen.append(plo.power_limit)
                    spin(0.0003)
                    plo.on_step_end()
                plo.on_epoch_end()
                own.append(mon.end_window("epoch").total_energy)
            return seen, own, plo.epochs

    got = run_ranks(ThreadGroup.make(2), rank)
    assert not any(isinstance(x, BaseException) for x in got), got
    (seen0, own0, epochs0), (seen1, own1, epochs1) = got
    assert seen0 == seen1 and len(set(seen0)) == 13  # the same limit on both GPUs at every step
    assert epochs0 == epochs1  # rank 0's combined epoch measurement, on every rank
    for e, a, b in zip(epochs0, own0, own1):
        assert e["energy_j"] == pytest.approx(a + b, rel=0.1)  # the ranks' energy, summed
    assert limits(gpus) == [400.0, 400.0]


def test_a_try_is_chosen_once_and_its_energy_is_the_ranks_sum():
    def rank(g):
        bso = BatchSizeOptimizer(job="bso-ranks", policy="mab", batch_sizes=[32, 64], default=64, max_power_w=100.0 + g.rank, group=g)
        t = bso.next()
        stop = t.should_stop(Measurement(1.0 + g.rank, {"gpu0": 10.0 * (g.rank + 1)}))
        rec = bso.report(t, energy_j=10.0 * (g.rank + 1), time_s=1.0 + g.rank, reached=True)
        bso.close()
        return t.batch_size, stop, rec, bso.max_power_w

    (b0, s0, r0, p0), (b1, s1, r1, p1) = run_ranks(ThreadGroup.make(2), rank)
    assert b0 == b1 == 64 and s0 is s1 is False and r0 == r1
    assert (r0.energy_j, r0.time_s) == (30.0, 2.0)  # energy summed, time of the slowest
    assert p0 == p1 == 201.0
    store = open_store(".zeus/bso-ranks.sqlite", get_registry())
    try:
        assert [(t.recurrence, t.energy_j) for t in store.tries()] == [(1, 30.0)]  # one job, written once
        assert store.identity()["job"]["processes"] == 2
    finally:
        store.close()


def test_ranks_that_disagree_are_refused_on_every_rank_with_what_differs():
    def rank(g):
        return BatchSizeOptimizer(job="mismatch", batch_sizes=[32, 64 if g.rank == 0 else 128], max_power_w=1.0, group=g)

    got = run_ranks(ThreadGroup.make(2), rank)
    for e in got:
        assert isinstance(e, ValueError)
        assert "disagree about the BatchSizeOptimizer (batch_sizes: rank 0 [32, 64], rank 1 [32, 128])" in str(e)


def test_a_decision_rank_0_cannot_make_stops_every_rank():
    def rank(g):
        bso = BatchSizeOptimizer(job="split", batch_sizes=[32], default=32, max_power_w=1.0, group=g)
        t = bso.next()
        return bso.report(t, energy_j=1.0, time_s=1.0, reached=g.rank == 0)

    e0, e1 = run_ranks(ThreadGroup.make(2), rank)
    assert isinstance(e0, ValueError) and "the ranks disagree whether try 1 reached the target: [True, False]" in str(e0)
    assert isinstance(e1, RuntimeError) and "rank 0 failed, so rank 1 stops too" in str(e1)


def test_combining_measurements_numbers_every_ranks_gpus():
    a = Measurement(2.0, {"gpu0": 10.0, "cpu0-package": 1.0}, {"gpu0": "counter"})
    b = Measurement(3.0, {"gpu0": 20.0, "gpu1": 5.0}, {"gpu1": "polling"})
    m = combine_measurements([a, b])
    assert m.time == 3.0 and m.gpu_energy == {0: 10.0, 1: 20.0, 2: 5.0} and m.energy["cpu0-package"] == 1.0
    assert m.total_system_energy == 36.0 and m.sources["gpu2"] == "polling"


class _Limits:
    """A follower's devices: records the limits rank 0 sent."""

    def __init__(self):
        self.set = []

    def power_limit_range(self):
        return (100.0, 400.0)

    def power_limit(self):
        return self.set[-1] if self.set else None

    def set_power_limit(self, watts):
        self.set.append(watts)


def test_a_follower_handles_the_cores_ops_where_they_come_and_names_both_ops_when_the_ranks_diverge():
    devices = _Limits()

    def rank(g):
        if g.rank == 0:
            g.broadcast(("limit", 250.0))  # may come anywhere: handled on the way
            assert lead(g, "iteration", lambda: "acted") == "acted"
            g.broadcast(("epoch_end",))  # rank 0 ended its epoch ...
            return None
        follower = Follower(g, devices=devices)
        assert follower.follow("iteration") == "acted"
        return follower.follow("iteration")  # ... where rank 1 is still iterating

    r0, r1 = run_ranks(ThreadGroup.make(2), rank)
    assert r0 is None and devices.set == [250.0]
    assert isinstance(r1, ProtocolError)
    assert "rank 1 expected iteration from rank 0 but got epoch_end: the ranks' calls diverged" in str(r1)


def test_a_rank_that_makes_one_step_fewer_in_a_profiled_epoch_stops_at_that_step(gpus):
    lock = threading.Lock()

    def rank(g):
        with lock:
            mon = ZeusMonitor(gpu_indices=[g.rank], cpu_indices=[])
        with mon:
            plo = PowerLimitOptimizer(mon, "jit", job="diverged", options=QUICK_JIT, group=g)
            try:
                plo.on_epoch_begin()
                for _ in range(5 - g.rank):  # rank 1 makes one step fewer
                    plo.on_step_begin()
                    plo.on_step_end()
                plo.on_epoch_end()
            finally:
                g.leave()  # as a process that failed leaves its group: close() then puts this rank's GPU back
                with contextlib.suppress(threading.BrokenBarrierError):
                    plo.close()

    r0, r1 = run_ranks(ThreadGroup.make(2), rank)
    assert isinstance(r1, ProtocolError) and "rank 1 expected epoch_end from rank 0 but got iteration" in str(r1)
    assert isinstance(r0, threading.BrokenBarrierError)  # rank 1 left: rank 0's next collective fails
    assert limits(gpus) == [400.0, 400.0]


def test_rank_0s_failure_at_a_decision_stops_the_follower_with_its_message():
    def rank(g):
        if g.rank == 0:
            return lead(g, "epoch", lambda: 1 / 0)
        return Follower(g).follow("epoch")

    r0, r1 = run_ranks(ThreadGroup.make(2), rank)
    assert isinstance(r0, ZeroDivisionError)
    assert isinstance(r1, LeaderFailed) and "rank 0 failed, so rank 1 stops too: ZeroDivisionError: division by zero" in str(r1)
