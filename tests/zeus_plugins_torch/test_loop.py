"""The training-loop handle over the runner's session: epochs, metric, early stop, iterations."""

from __future__ import annotations

import math

import pytest

from zeus_core import JobOptions, Monitor
from zeus_core.engine.session import RunSession
from zeus_plugins_torch.loop import LocalDriver, SyncedPolicy, ZeusLoop, split_batch


def make_loop(device, policy=None, *, target=0.9, max_epochs=10, cost_bound=math.inf, batch_size=32, **kw):
    job = JobOptions(name="t", target_metric=target, max_epochs=max_epochs)
    session = RunSession(
        job=job,
        batch_size=batch_size,
        recurrence=1,
        try_index=1,
        cost_bound=cost_bound,
        devices=device,
        monitor=Monitor(device, sync="none"),
        power_policy=policy,
    )
    return session, ZeusLoop(LocalDriver(session), batch_size=batch_size, base_batch_size=kw.pop("base", None), **kw)


@pytest.fixture
def device(torchtest):
    return torchtest.WallDevice(torchtest.WallOptions(watts=100.0), None)


def test_epochs_end_at_the_target_and_metric_is_kept(device):
    session, zeus = make_loop(device, target=0.5)
    seen = []
    for epoch in zeus.epochs():
        seen.append(epoch)
        reached = zeus.report_metric(0.2 * epoch)
        assert reached == (0.2 * epoch >= 0.5)
    assert seen == [1, 2, 3]
    assert zeus.reached and zeus.stopped is None and zeus.metric == pytest.approx(0.6)
    assert zeus.epochs_done == 3 and len(zeus.measurements) == 3
    assert all(m.time > 0 and m.total_system_energy > 0 for m in zeus.measurements)


def test_max_epochs_ends_the_loop_not_reached(device):
    session, zeus = make_loop(device, target=0.99, max_epochs=4)
    for _ in zeus.epochs():
        zeus.report_metric(0.1)
    assert not zeus.reached and zeus.stopped == "max-epochs" and zeus.epochs_done == 4


def test_early_stop_ends_the_loop_cleanly(device):
    # Any real epoch costs more than half this bound, so a second epoch would pass it.
    session, zeus = make_loop(device, target=0.99, cost_bound=1e-9)
    after = []
    for _epoch in zeus.epochs():
        for _ in zeus.iterations(3):
            pass
        zeus.report_metric(0.1)
    after.append("code after the loop runs")
    assert after and zeus.stopped == "early-stop" and not zeus.reached and zeus.epochs_done == 1


class Recorder:
    """A power policy that profiles the first epoch only and records when it acts."""

    def __init__(self, events):
        self.events = events
        self.epoch = 0
        self.epochs_ended = []

    def begin_run(self, session):
        pass

    def on_epoch_end(self, session, epoch, measurement):
        self.epochs_ended.append(epoch)

    def end_run(self, session):
        pass

    def get_state(self):
        return {"epoch": self.epoch}

    def set_state(self, state):
        self.epoch = state["epoch"]

    def wants_iterations(self, session):
        self.epoch += 1
        return self.epoch == 1

    def on_iteration(self, session, i):
        self.events.append(("policy", i, session.epoch_iterations))


def test_policy_acts_between_iterations_synchronised(device):
    events = []
    policy = SyncedPolicy(Recorder(events), sync=lambda: events.append(("sync",)))
    session, zeus = make_loop(device, policy, target=0.99, max_epochs=2)

    def batches(n):
        for i in range(n):
            events.append(("fetch", i))
            yield i

    for epoch in zeus.epochs():
        for b in zeus.iterate(batches(2), count=2):
            events.append(("step", epoch, b))
        zeus.report_metric(0.0)
    assert events == [
        ("fetch", 0),
        ("sync",),
        ("policy", 0, 2),
        ("step", 1, 0),
        ("fetch", 1),
        ("sync",),
        ("policy", 1, 2),
        ("step", 1, 1),
        ("fetch", 0),
        ("step", 2, 0),
        ("fetch", 1),
        ("step", 2, 1),
    ]
    assert session.epoch_profiled == [True, False]
    assert policy.inner.epochs_ended == [1, 2]  # the session's calls reach the wrapped policy
    policy.set_state({"epoch": 7})
    assert policy.get_state() == {"epoch": 7}


class Settled(Recorder):
    """A JIT-like policy that knows what an epoch costs at the limit it settled on."""

    def steady_epoch_cost(self, session):
        return 5.0


@pytest.mark.parametrize("inner, steady", [(Settled, 5.0), (Recorder, None)])
def test_the_wrapper_keeps_the_policys_steady_epoch_cost(device, inner, steady):
    # The session asks its (wrapped) policy for SteadyEpochCost: the try's steady cost is the
    # unprofiled epoch plus the settled cost for the profiled one, or unknown without it.
    session, zeus = make_loop(device, SyncedPolicy(inner([]), sync=lambda: None), target=0.99, max_epochs=2)
    for _epoch in zeus.epochs():
        for _ in zeus.iterations(2):
            pass
        zeus.report_metric(0.0)
    assert session.epoch_profiled == [True, False]
    if steady is None:
        assert session.steady_cost() is None
    else:
        assert session.steady_cost() == pytest.approx(session.epoch_costs[1] + steady)


def test_iterate_needs_a_count_without_len(device):
    _, zeus = make_loop(device)
    with pytest.raises(ValueError, match="count="):
        zeus.iterate(iter([1, 2]))
    assert list(zeus.iterate([1, 2, 3])) == [1, 2, 3]


def test_global_batch_is_split_across_ranks():
    assert [split_batch(10, 3, r) for r in range(3)] == [4, 3, 3]
    with pytest.raises(ValueError, match="cannot be split over 4 processes"):
        split_batch(3, 4, 0)
    shards = [ZeusLoop(None, batch_size=8, base_batch_size=None, rank=r, world_size=3).shard(10) for r in range(3)]
    assert [list(s) for s in shards] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
