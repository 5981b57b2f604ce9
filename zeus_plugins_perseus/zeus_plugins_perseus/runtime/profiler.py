"""Online profiling: sweep SM clocks during training and measure every instruction at each.

:class:`OnlineProfiler` has the same hooks as :class:`PerseusHooks`
(``on_step_begin/end``, ``on_instruction_begin/end``), so an engine
instrumented for Perseus is profiled by handing it these hooks instead. It
locks one clock per block of ``warmup_steps + profile_steps`` steps, highest
first; in the profiled steps each instruction is one measurement window of the
core's :class:`zeus_core.Monitor` (synchronised with the
accelerator at both edges, so its kernels are paid for by its own window).
Time and energy are averaged per (instruction, clock) over every microbatch of
the profiled steps. After the last clock, or once the energy of every
instruction rose ``stop_after_rises`` clocks in a row (lower clocks would only
cost more), the clocks are reset and the hooks do nothing more.

With ``thermally_stable`` the warm-up at each clock goes on past ``warmup_steps`` (at
most ``max_warmup_steps`` more) until the devices' power and temperature have settled
(:mod:`zeus_core.profiling`: a reading when the clock is locked and after each warm-up
step), so a clock measured after a hotter one is not charged for its heat. Where the
readings do not change it adds no step (it needs ``warmup_steps`` >= 1 to act). The
``perseus-stage`` part turns it on by default (``[profiler] thermally_stable``); these hooks
take it as they are given it (off unless passed), so code that builds them itself (zeus-compat's
``PipelineFrequencyOptimizer``, a script) and sizes its loop by :attr:`total_steps` keeps
what it had.

``rows()`` gives ``(stage, instruction, MHz, seconds, joules)`` for the profile
CSV (``to_csv``) and ``measurements()`` the same without the stage for
:meth:`PlanClient.upload_profile`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from zeus_core import Monitor
from zeus_core.devicekit import simulated
from zeus_core.profiling import Settler, Settling, device_probe
from zeus_plugins_perseus.profile import InstructionProfile
from zeus_plugins_perseus.runtime.hooks import ScheduleError


class OnlineProfiler:
    """Per-rank hooks that profile the rank's stage at every clock of ``frequencies``."""

    def __init__(
        self,
        devices: Any,
        stage: int,
        frequencies: Iterable[int] | None = None,
        warmup_steps: int = 1,
        profile_steps: int = 2,
        stop_after_rises: int = 0,
        min_frequency: int = 0,
        names: Sequence[str] | None = None,
        set_frequency: Callable[[int], Any] | None = None,
        reset: Callable[[], Any] | None = None,
        monitor: Monitor | None = None,
        thermally_stable: bool = False,
        max_warmup_steps: int = 100,
        settling: Settling | None = None,
    ) -> None:
        if warmup_steps < 0 or profile_steps < 1:
            raise ValueError(f"need warmup_steps >= 0 and profile_steps >= 1, got {warmup_steps} and {profile_steps}")
        self._driver_mark = simulated.reads()  # the simulated drivers called from here on measured this profile
        set_clocks = set_frequency or getattr(devices, "lock_clocks", None)
        reset_clocks = reset or getattr(devices, "reset_clocks", None)
        if not callable(set_clocks) or not callable(reset_clocks):
            raise ValueError(
                f"device {type(devices).__name__} cannot lock and reset SM clocks; "
                "online profiling needs a device plugin with clock control"
            )
        self._set: Callable[[int], Any] = set_clocks
        self._reset: Callable[[], Any] = reset_clocks
        if frequencies is None:
            listed = getattr(devices, "supported_clocks", None)
            if not callable(listed):
                raise ValueError("give frequencies: the device cannot list its supported SM clocks")
            frequencies = listed()
        self.frequencies = sorted({int(f) for f in frequencies if int(f) >= min_frequency}, reverse=True)
        if not self.frequencies:
            raise ValueError(f"no SM clock to profile at or above min_frequency = {min_frequency} MHz")
        self.stage = int(stage)
        self.warmup_steps = warmup_steps
        self.profile_steps = profile_steps
        self.stop_after_rises = stop_after_rises
        self.names = list(names) if names else list(devices.names)
        unknown = [n for n in self.names if n not in devices.names]
        if unknown:
            raise ValueError(f"devices {unknown} are not in the device group (it has {', '.join(devices.names)})")
        self.monitor = monitor or Monitor(devices)
        self.thermally_stable = thermally_stable
        self.max_warmup_steps = max_warmup_steps
        self._settling = settling or Settling()
        self._probe = device_probe(devices) if thermally_stable else None
        self._settler: Settler | None = None
        self._extra = 0  # warm-up steps added at the current clock
        #: warm-up steps added at each clock (thermally_stable): MHz -> steps
        self.extra_warmup: dict[int, int] = {}
        self._index = 0  # into self.frequencies
        self._step = 0  # steps done at the current clock
        self._in_step = False
        self._open: str | None = None
        self._samples: dict[tuple[str, int], list[tuple[float, float]]] = {}
        self._rises = 0
        self.done = False
        self.steps = 0

    @property
    def frequency(self) -> int | None:
        """The clock being profiled now (None when done)."""
        return None if self.done else self.frequencies[self._index]

    @property
    def total_steps(self) -> int:
        """Steps the sweep takes if it does not stop early (at most, with ``thermally_stable``)."""
        extra = self.max_warmup_steps if self.thermally_stable and self.warmup_steps else 0
        return len(self.frequencies) * (self.warmup_steps + extra + self.profile_steps)

    @property
    def planned_steps(self) -> int:
        """Steps the sweep takes if it does not stop early, counting the warm-up steps added so far
        (``thermally_stable``; never more than :attr:`total_steps`)."""
        return len(self.frequencies) * (self.warmup_steps + self.profile_steps) + sum(self.extra_warmup.values())

    def _measuring(self) -> bool:
        return not self.done and self._step >= self.warmup_steps

    # -- hooks --

    def on_step_begin(self) -> None:
        if self._in_step:
            raise ScheduleError("on_step_begin called twice without on_step_end")
        self._in_step = True
        if not self.done and self._step == 0 and self._extra == 0:
            self._set(self.frequencies[self._index])
            if self._probe is not None:
                self._settler = Settler(self._settling)
                self._settler.add(self._probe())

    def on_instruction_begin(self, name: str, microbatch: int | None = None) -> None:
        if not self._in_step:
            raise ScheduleError(f"on_instruction_begin({name!r}) outside a step; call on_step_begin first")
        if self._open is not None:
            raise ScheduleError(f"on_instruction_begin({name!r}) while {self._open!r} is still running")
        self._open = name
        if self._measuring():
            self.monitor.begin_window(f"perseus-profile:{name}")

    def on_instruction_end(self, name: str) -> None:
        if self._open != name:
            raise ScheduleError(f"on_instruction_end({name!r}) without a matching on_instruction_begin")
        self._open = None
        if self._measuring():
            m = self.monitor.end_window(f"perseus-profile:{name}")
            energy = sum(m.energy[n] for n in self.names)
            self._samples.setdefault((name, self.frequencies[self._index]), []).append((m.time, energy))

    def on_step_end(self) -> None:
        if not self._in_step:
            raise ScheduleError("on_step_end without on_step_begin")
        if self._open is not None:
            raise ScheduleError(f"the step ended while {self._open!r} was still running")
        self._in_step = False
        self.steps += 1
        if self.done:
            return
        self._step += 1
        if self._step == self.warmup_steps and self._probe is not None and self._settler is not None:
            if not self._settler.add(self._probe()) and self._extra < self.max_warmup_steps:
                self._step -= 1  # one more warm-up step at this clock
                self._extra += 1
                self.extra_warmup[self.frequencies[self._index]] = self._extra
                return
        elif self._probe is not None and self._settler is not None and self._step < self.warmup_steps:
            self._settler.add(self._probe())
        if self._step == self.warmup_steps + self.profile_steps:
            self._next_frequency()

    def abort_step(self) -> None:
        """The engine raised mid-step: end the sweep, which resets the clocks (what was measured is kept)."""
        self._in_step = False
        self._open = None
        self.close()

    # -- sweep --

    def _means(self, mhz: int) -> dict[str, tuple[float, float]]:
        out = {}
        for (inst, f), samples in self._samples.items():
            if f == mhz:
                out[inst] = (sum(t for t, _ in samples) / len(samples), sum(e for _, e in samples) / len(samples))
        return out

    def _next_frequency(self) -> None:
        mhz = self.frequencies[self._index]
        if not self._means(mhz):
            raise ScheduleError(
                f"no instruction was measured at {mhz} MHz: the engine must call on_instruction_begin/end around every forward and backward"
            )
        if self._index > 0 and self.stop_after_rises:
            now, before = self._means(mhz), self._means(self.frequencies[self._index - 1])
            common = [i for i in now if i in before]
            rose = bool(common) and all(now[i][1] > before[i][1] for i in common)
            self._rises = self._rises + 1 if rose else 0
        self._index += 1
        self._step = 0
        self._extra = 0
        if self._index == len(self.frequencies) or (self.stop_after_rises and self._rises >= self.stop_after_rises):
            self.close()

    def close(self) -> None:
        """End the sweep (if not already) and reset the clocks."""
        if self.done:
            return
        self.done = True
        self.monitor.reset_windows()
        self._reset()

    # -- results --

    def measurements(self) -> list[tuple[str, int, float, float]]:
        """(instruction, MHz, mean seconds, mean joules) of every clock measured so far, highest clock first."""
        out = []
        for mhz in self.frequencies:
            for inst, (t, e) in sorted(self._means(mhz).items()):
                out.append((inst, mhz, t, e))
        return out

    def rows(self) -> list[tuple[int, str, int, float, float]]:
        return [(self.stage, i, f, t, e) for i, f, t, e in self.measurements()]

    def profile(self) -> InstructionProfile:
        """What was measured, with the simulated drivers it was measured on (none on real hardware)."""
        return InstructionProfile.from_rows(self.rows(), source=f"online profile of stage {self.stage}", simulated=self.simulated_drivers)

    @property
    def simulated_drivers(self) -> list[str]:
        """The simulated drivers (their variables, ``ZEUS_FAKE_NVML``) called since this profiler began."""
        return simulated.read_since(self._driver_mark)

    def to_csv(self, path: str | Path) -> Path:
        """Write ``stage,instruction,frequency,time,energy`` (the planner's input; ``simulated`` after them
        where measured on a simulated driver)."""
        if not self._samples:
            raise ValueError("nothing was profiled yet")
        return self.profile().to_csv(Path(path))
