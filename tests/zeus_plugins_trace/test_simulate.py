"""The simulator's accounting on a hand-computed trace: profiling epoch, early stop, retries, never-ran."""

from __future__ import annotations

import pytest

from zeus_core import JobOptions
from zeus_plugins_trace.simulate import SimulationError, simulate
from zeus_plugins_trace.traces import load_traces, select

# bs 8:  200 W: 10 s at 150 W (1500 J, cost 1750); 100 W: 12 s at 90 W (1080 J, cost 1740) -> JIT holds 100 W
#        profiling epoch: mean 11 s, 1290 J (cost 1745); every run reaches the target at epoch 3
# bs 16: 200 W: 6 s at 180 W (1080 J, cost 1140); 100 W: 9 s at 100 W (900 J, cost 1350) -> JIT holds 200 W
#        profiling epoch: mean 7.5 s, 990 J; never reaches the target
# bs 32: only 200 W: 100 s at 200 W (cost 30000 per epoch); reaches at epoch 1
# eta = 0.5, MAXPOWER = 200 W
TRAIN = """dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch
d,n,8,sgd,0.1,1,0.5,3
d,n,16,sgd,0.1,1,0.5,nan
d,n,32,sgd,0.1,1,0.5,1
"""
POWER = """dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power
d,n,8,sgd,200,10,150
d,n,8,sgd,100,12,90
d,n,16,sgd,200,6,180
d,n,16,sgd,100,9,100
d,n,32,sgd,200,100,200
"""


class Scripted:
    """A batch-size policy that replays a list and records what it observed."""

    def __init__(self, sizes):
        self.sizes = list(sizes)
        self.seen = []

    def choose(self, ctx):
        return self.sizes.pop(0)

    def observe(self, ctx, record):
        self.seen.append((ctx.min_cost, record))


@pytest.fixture
def trace(tmp_path):
    (tmp_path / "summary_train.csv").write_text(TRAIN)
    (tmp_path / "summary_power_g.csv").write_text(POWER)
    return select(load_traces(tmp_path, "g"), "d", "n", "sgd", 0.5)


def job(n, beta=2.0, max_epochs=100, max_tries=20):
    return JobOptions(
        name="t", recurrences=n, seed=0, eta_knob=0.5, beta_knob=beta, target_metric=0.5, max_epochs=max_epochs, max_tries=max_tries
    )


def test_profiling_epoch_early_stop_and_retries(trace):
    policy = Scripted([8, 16, 8, 16, 8])
    r = simulate(trace, policy, job(3))
    rec = [(x.recurrence, x.try_index, x.batch_size, x.power_limit, x.epochs, x.reached, x.stopped) for x in r.records]
    assert rec == [
        (1, 1, 8, 100, 3, True, None),
        (2, 1, 16, 200, 9, False, "early-stop"),  # floor(2 x 5225 / 1140) = 9 epochs
        (2, 2, 8, 100, 3, True, None),
        (3, 1, 16, 200, 9, False, "early-stop"),
        (3, 2, 8, 100, 3, True, None),
    ]
    # recurrence 1: profiling epoch (1290 J, 11 s) + 2 epochs at 100 W
    assert r.records[0].energy_j == pytest.approx(1290 + 2 * 1080)
    assert r.records[0].time_s == pytest.approx(11 + 2 * 12)
    assert r.records[0].cost == pytest.approx(5225)
    # first run of 16 profiles too: 990 J + 8 x 1080 J, 7.5 s + 8 x 6 s
    assert r.records[1].cost == pytest.approx(0.5 * (990 + 8 * 1080) + 0.5 * 200 * (7.5 + 48))
    assert r.records[2].cost == pytest.approx(5220)  # no more profiling at 8
    assert r.records[3].cost == pytest.approx(9 * 1140)
    # a recurrence's cost counts all its tries; min_cost stays the cheapest recurrence
    assert r.recurrence_cost[1] == pytest.approx(r.records[1].cost + 5220)
    assert [m for m, _ in policy.seen] == [float("inf"), 5225, 5225, 5225, 5225]
    assert r.records[1].steady_cost == pytest.approx(9 * 1140)


def test_never_ran_costs_nothing_and_retries(trace):
    policy = Scripted([8, 32, 8])
    r = simulate(trace, policy, job(2))
    never = r.records[1]
    assert (never.batch_size, never.epochs, never.cost, never.stopped) == (32, 0, 0.0, "never-ran")
    assert r.recurrence_cost[1] == pytest.approx(5220)


def test_max_epochs_failure_and_too_many_tries(trace):
    policy = Scripted([16, 16])
    with pytest.raises(SimulationError, match="did not reach the target in 2 tries"):
        simulate(trace, policy, job(1, max_epochs=5, max_tries=2))
    assert [x.stopped for _, x in policy.seen] == ["max-epochs", "max-epochs"]
    assert policy.seen[0][1].epochs == 5


def test_trace_device_predicts_every_limit_of_a_batch_size_before_running(trace):
    from zeus_plugins_trace.device import TraceDevice, TraceDeviceOptions

    dev = TraceDevice(TraceDeviceOptions(gpu=trace.gpu))
    dev.attach(trace)
    b = int(trace.batch_sizes[0])
    rows = dev.predict_epoch(b)
    limits = trace.limits_of(b)
    assert [p for p, _t, _e in rows] == [float(p) for p in limits]
    for p, t, e in rows:
        dev.use_batch_size(b)
        dev.set_power_limit(p)
        assert (t, e) == pytest.approx(dev.epoch_time_energy())
    assert dev.predict_epoch(123457) is None
