"""The online stage profiler, thermally stable (issue 37 item 3): on a GPU whose temperature still
rises after a clock change, each clock warms up until it has settled; where it does not change,
the sweep is step for step the one without."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perseus_fakes import VirtualGPU, stage_step  # noqa: E402

from zeus_plugins_perseus.options import StageProfilerOptions  # noqa: E402
from zeus_plugins_perseus.runtime import OnlineProfiler  # noqa: E402
from zeus_plugins_perseus.schedule import one_f_one_b_order  # noqa: E402


class WarmingGPU(VirtualGPU):
    """The virtual GPU with a die that heats 10 degrees per second after each clock lock for ``heat_s``
    seconds, then holds; ``heat_s = 0``: a constant temperature."""

    def __init__(self, heat_s: float, **kw) -> None:
        super().__init__(**kw)
        self.heat_s = heat_s
        self.locked_at = 0.0
        self.temps: list[tuple[float, float]] = []  # (virtual time, temperature) at each reading
        self.locks: list[float] = []  # virtual time of each lock

    def lock_clocks(self, mhz: int) -> None:
        super().lock_clocks(mhz)
        self.locked_at = self.t
        self.locks.append(self.t)

    def read_temperatures(self) -> dict:
        temp = 50.0 + 10.0 * min(self.t - self.locked_at, self.heat_s)
        self.temps.append((self.t, temp))
        return {"gpu0": temp}


def _sweep(p: OnlineProfiler, gpu: VirtualGPU) -> None:
    step = stage_step(p, gpu, one_f_one_b_order(1, 1, 0))
    while not p.done:
        step()


def test_where_temperature_is_constant_the_sweep_is_step_for_step_the_same():
    runs = []
    for stable in (False, True):
        gpu = WarmingGPU(heat_s=0.0)
        p = OnlineProfiler(gpu, stage=0, warmup_steps=1, profile_steps=2, thermally_stable=stable)
        _sweep(p, gpu)
        runs.append((p.steps, gpu.log, p.measurements(), p.extra_warmup))
    assert runs[0] == runs[1] and runs[1][3] == {}  # no warm-up step added
    assert len(gpu.temps) == 2 * 4  # the thermally stable sweep read at each lock and after each warm-up step


def test_a_clock_still_heating_warms_up_until_it_settles_and_is_measured_after():
    gpu = WarmingGPU(heat_s=0.5)  # 5 degrees in 0.5 s; a step lasts 0.06 s (1410 MHz) to 0.09 s (800 MHz)
    p = OnlineProfiler(gpu, stage=0, warmup_steps=1, profile_steps=2, thermally_stable=True)
    assert p.total_steps == 4 * (1 + 100 + 2)  # at most
    _sweep(p, gpu)
    assert set(p.extra_warmup) == {1410, 1200, 1000, 800}
    assert p.steps == sum(1 + n + 2 for n in p.extra_warmup.values())
    # at every clock, the reading that ended the warm-up came after the die had stopped heating
    for lock, end in zip(gpu.locks, gpu.locks[1:] + [gpu.t]):
        last = max(t for t, _ in gpu.temps if lock <= t < end)
        assert last >= lock + 0.5
    capped = OnlineProfiler(WarmingGPU(heat_s=0.5), stage=0, warmup_steps=1, profile_steps=2, thermally_stable=True, max_warmup_steps=2)
    _sweep(capped, capped.monitor.devices)
    assert capped.extra_warmup == {1410: 2, 1200: 2, 1000: 2, 800: 2}  # a warm-up that does not settle ends at its cap


def test_the_stage_profiler_option_reaches_the_sweep():
    o = StageProfilerOptions(step="x.py:f", thermally_stable=True, max_warmup_steps=7)
    assert o.thermally_stable and o.max_warmup_steps == 7
    with pytest.raises(ValueError, match="max_warmup_steps"):
        StageProfilerOptions(step="x.py:f", max_warmup_steps=-1)


def test_on_by_default_in_the_stage_part_and_its_step_cap_follows_the_warm_up_added():
    assert StageProfilerOptions(step="x.py:f").thermally_stable  # the part's default; the hooks' own stays off
    gpu = WarmingGPU(heat_s=0.5)
    p = OnlineProfiler(gpu, stage=0, warmup_steps=1, profile_steps=2, thermally_stable=True)
    assert p.planned_steps == 4 * (1 + 2)  # nothing added yet: what a sweep without it takes
    _sweep(p, gpu)
    assert p.planned_steps == p.steps == 4 * 3 + sum(p.extra_warmup.values()) <= p.total_steps
