"""The JIT power policy on a simulated device: windows, choice, memory per batch size, ties."""

from __future__ import annotations

import pytest

from zeus_core import JobOptions, Monitor
from zeus_core.engine.session import RunSession
from zeus_plugins_mab.jit import JitPowerPolicy
from zeus_plugins_mab.options import JitOptions

# per epoch at batch size 8: (time s, power W) by limit; eta 0.5, MAXPOWER 300
# cost/epoch: 300 W: 0.5*10*250 + 150*10 = 2750; 250 W: 0.5*11*220 + 150*11 = 2860;
#             200 W: 0.5*14*190 + 150*14 = 3430 -> 300 W wins at batch size 8.
# batch size 16: 300 W and 250 W tie exactly (the GPU never draws more than 240 W); 200 W is dearer.
EPOCH = {8: {300: (10.0, 250.0), 250: (11.0, 220.0), 200: (14.0, 190.0)}, 16: {300: (5.0, 240.0), 250: (5.0, 240.0), 200: (7.0, 200.0)}}


class Gpu:
    """A minimal simulated device with a virtual clock (the JIT sees only the protocol)."""

    names = ["gpu0"]
    energy_sources = {"gpu0": "estimate"}
    max_power_w = 300.0

    def __init__(self):
        self.t = self.e = 0.0
        self.limit = 300.0
        self.bs = 8
        self.history = []

    def clock(self):
        return self.t

    def read_energy(self):
        return {"gpu0": self.e}

    def power_limit_range(self):
        return (200.0, 300.0)

    def power_limit(self):
        return self.limit

    def set_power_limit(self, w):
        self.limit = float(w)
        self.history.append(self.limit)

    def advance(self, n, per_epoch):
        t, p = EPOCH[self.bs][int(self.limit)]
        self.t += t * n / per_epoch
        self.e += t * p * n / per_epoch

    def close(self):
        pass


def run(policy, gpu, bs, epochs=2, per_epoch=1000):
    gpu.bs = bs
    job = JobOptions(name="t", eta_knob=0.5, max_epochs=epochs)
    s = RunSession(
        job=job, batch_size=bs, recurrence=1, try_index=1, cost_bound=float("inf"), devices=gpu, monitor=Monitor(gpu), power_policy=policy
    )
    policy.begin_run(s)
    for _ in s.epochs():
        for _start, n in s.chunks(per_epoch):
            gpu.advance(n, per_epoch)
    policy.end_run(s)
    return s


def test_profiles_high_to_low_then_holds_the_cheapest():
    gpu, jit = Gpu(), JitPowerPolicy(JitOptions(step_w=50.0), 0.5)
    s = run(jit, gpu, 8)
    assert gpu.history[:3] == [300.0, 300.0, 250.0]  # begin_run, then one window per limit
    assert 200.0 in gpu.history
    assert jit.choices["8"]["power_limit"] == 300.0 and gpu.limit == 300.0
    assert jit.choices["8"]["cost_per_iteration"] == pytest.approx(2750 / 1000)
    assert s.epoch_profiled == [True, False]
    # 3 windows of 10 + 40 iterations: 150 profiled iterations, the rest of the epoch at 300 W
    assert s.epoch_measurements[0].time == pytest.approx((1000 - 100) / 1000 * 10 + 50 / 1000 * (11 + 14))
    assert s.steady_cost() == pytest.approx(2 * 2750)  # what the runner records as the try's steady_cost
    gpu.history.clear()
    s = run(jit, gpu, 8)  # remembered: no profiling, straight to the choice
    assert gpu.history == [300.0] and s.epoch_profiled == [False, False]


def test_spread_over_epoch_charges_the_mean_over_limits_and_ties_go_high():
    gpu, jit = Gpu(), JitPowerPolicy(JitOptions(step_w=50.0, spread_over_epoch=True), 0.5)
    s = run(jit, gpu, 16, epochs=1, per_epoch=999)
    assert s.epoch_measurements[0].time == pytest.approx((5.0 + 5.0 + 7.0) / 3)
    assert jit.choices["16"]["power_limit"] == 300.0  # 300 and 250 tie: the higher one


def test_windows_cut_by_the_epoch_end_are_measured_again():
    gpu, jit = Gpu(), JitPowerPolicy(JitOptions(step_w=50.0), 0.5)
    s = run(jit, gpu, 8, epochs=2, per_epoch=120)  # two 50-iteration windows fit per epoch
    assert s.epoch_profiled == [True, True] and jit.choices["8"]["power_limit"] == 300.0


def test_choices_survive_a_restart():
    gpu, jit = Gpu(), JitPowerPolicy(JitOptions(step_w=50.0), 0.5)
    run(jit, gpu, 8, epochs=1)
    fresh = JitPowerPolicy(JitOptions(step_w=50.0), 0.5)
    fresh.set_state(jit.get_state())
    assert not run(fresh, gpu, 8).epoch_profiled[0]


def test_thermally_stable_by_default_and_a_window_planned_without_warm_up_is_measured_as_planned():
    assert JitOptions().thermally_stable
    seen = []
    for stable in (False, True):  # this device reads no power or temperature: settling has one reading per slot
        gpu, jit = Gpu(), JitPowerPolicy(JitOptions(step_w=50.0, warmup_iters=0, thermally_stable=stable), 0.5)
        s = run(jit, gpu, 8)
        seen.append((gpu.history, s.epoch_measurements[0].time, s.epoch_measurements[0].total_system_energy, jit.choices))
    assert seen[0] == seen[1]  # no iteration added to a slot that has no warm-up to extend
