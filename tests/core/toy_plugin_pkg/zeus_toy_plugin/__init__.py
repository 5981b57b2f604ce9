"""A deterministic simulated device and workload, for testing the core without hardware.

Device ``toy``: a virtual clock and energy counter; power limits in [min, max].
Workload ``toy``: epochs to target = 4 + 2*|log2(bs/64)| (never for bs >= never_bs);
an epoch takes 10*sqrt(64/bs)*(max/limit)**0.3 seconds at min(limit, 250) W.
"""

from __future__ import annotations

import math

import attrs

from zeus_core import hookimpl


@attrs.define
class ToyDeviceOptions:
    max_power_w: float = 300.0
    min_power_w: float = 100.0
    can_set_power: bool = True
    closed_marker: str = ""  # close() appends a line here (for tests in other processes)


class ToyDevice:
    restored = 0

    def __init__(self, options: ToyDeviceOptions, context) -> None:
        self.o = options
        self.names = ["toy0"]
        self.energy_sources = {"toy0": "counter"}
        self.max_power_w = options.max_power_w
        self.t = 0.0
        self.e = 0.0
        self.limit = options.max_power_w
        if options.can_set_power:
            self.power_limit_range = lambda: (self.o.min_power_w, self.o.max_power_w)
            self.set_power_limit = self._set
            self.power_limit = lambda: self.limit

    def _set(self, w: float) -> None:
        if not self.o.min_power_w <= w <= self.o.max_power_w:
            raise ValueError(f"power limit {w} outside range")
        self.limit = float(w)

    def clock(self) -> float:
        return self.t

    def read_energy(self) -> dict[str, float]:
        return {"toy0": self.e}

    def advance(self, seconds: float, watts: float) -> None:
        self.t += seconds
        self.e += seconds * watts

    def close(self) -> None:
        ToyDevice.restored += 1
        self.limit = self.o.max_power_w
        if self.o.closed_marker:
            with open(self.o.closed_marker, "a") as f:
                f.write("closed\n")


@attrs.define
class ToyWorkloadOptions:
    batch_sizes: list[int] = attrs.field(factory=lambda: [16, 32, 64, 128, 256])
    default_batch_size: int = 64
    never_bs: int = 256
    fail_at_try: int = 0  # raise in this try (counting calls), for tests
    sleep_s: float = 0.0  # real seconds per epoch, for signal tests
    # outputs: ``output_files`` files under toy/ in --output; with ``hold_outputs`` (a path) set, after the
    # first half it creates ``<hold_outputs>.held`` and waits (up to a minute) for ``hold_outputs`` to exist
    output_files: int = 0
    hold_outputs: str = ""


class ToyWorkload:
    def __init__(self, options: ToyWorkloadOptions, context) -> None:
        self.o = options
        self.batch_sizes = list(options.batch_sizes)
        self.default_batch_size = options.default_batch_size
        self.device = context.parts["device"]
        self.calls = 0

    def write_outputs(self, out_dir, job) -> list:
        import time
        from pathlib import Path

        from zeus_core import write_atomic

        written = []
        if self.o.output_files:
            (Path(out_dir) / "toy").mkdir(exist_ok=True)
        for i in range(self.o.output_files):
            if self.o.hold_outputs and i == self.o.output_files // 2:
                Path(self.o.hold_outputs + ".held").write_text("")
                deadline = time.monotonic() + 60
                while not Path(self.o.hold_outputs).exists() and time.monotonic() < deadline:
                    time.sleep(0.02)
            written.append(write_atomic(Path(out_dir) / "toy" / f"{i:03d}.txt", f"{i}\n"))
        return written

    def epochs_to_target(self, bs: int) -> float:
        if bs >= self.o.never_bs:
            return math.inf
        return 4 + 2 * abs(math.log2(bs / 64))

    def run(self, session) -> None:
        self.calls += 1
        if self.o.fail_at_try and self.calls == self.o.fail_at_try:
            raise RuntimeError("toy training crashed")
        bs = session.batch_size
        dev = self.device
        for epoch in session.epochs():
            if self.o.sleep_s:
                import time

                time.sleep(self.o.sleep_s)
            limit = getattr(dev, "limit", dev.max_power_w)
            tpe = 10 * math.sqrt(64 / bs) * (dev.max_power_w / limit) ** 0.3
            for _start, n in session.chunks(100):
                limit = getattr(dev, "limit", dev.max_power_w)
                dev.advance(tpe * n / 100, min(limit, 250.0))
            session.report_metric(epoch / self.epochs_to_target(bs))


class CountingPolicy:
    """Fixed batch size; its state counts observations (to detect lost updates)."""

    @attrs.define
    class Options:
        default: int = 32

    def __init__(self, options, context) -> None:
        self.bs = options.default
        self.observed = 0
        self.chosen = 0

    def choose(self, ctx) -> int:
        self.chosen += 1
        return self.bs

    def observe(self, ctx, record) -> None:
        self.observed += 1

    def get_state(self):
        return {"observed": self.observed, "chosen": self.chosen}

    def set_state(self, state) -> None:
        self.observed = state["observed"]
        self.chosen = state["chosen"]


class AlternatePolicy:
    """Batch size by recurrence number: concurrent runners of one job get different sizes."""

    @attrs.define
    class Options:
        batch_sizes: list[int] = attrs.field(factory=lambda: [16, 32, 64, 128])

    def __init__(self, options, context) -> None:
        self.sizes = list(options.batch_sizes)

    def choose(self, ctx) -> int:
        return self.sizes[(ctx.recurrence - 1) % len(self.sizes)]

    def observe(self, ctx, record) -> None:
        pass

    def get_state(self):
        return None

    def set_state(self, state) -> None:
        pass


@hookimpl
def zeus_register_batch_size_policies(register):
    register("counting", CountingPolicy)
    register("alternate", AlternatePolicy)


@hookimpl
def zeus_register_devices(register):
    register("toy", ToyDevice, options=ToyDeviceOptions)


@hookimpl
def zeus_register_workloads(register):
    register("toy", ToyWorkload, options=ToyWorkloadOptions)


@hookimpl
def zeus_register_commands(cli):
    import click

    @cli.command("toy-wait")
    @click.argument("marker")
    def toy_wait(marker):
        """Create MARKER, then wait (at most a minute): a command that handles no signal itself, for tests."""
        import time
        from pathlib import Path

        Path(marker).write_text("")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.02)
