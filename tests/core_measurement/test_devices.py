"""`zeus_core.engine.assembly.open_device`: a device plugin by name outside a job, with the job's option checks."""

from __future__ import annotations

import functools
import multiprocessing as mp
import pickle
import types

import attrs
import pytest

from zeus_core import BuildContext, DeviceError, hookimpl, open_device
from zeus_core.engine import registry as zreg
from zeus_core.engine.assembly import DeviceOpenError, open_devices


@attrs.define
class ClockOptions:
    clocks: list[int] = attrs.field(factory=lambda: [1410, 1005])
    label: str = "gpu0"

    @clocks.validator
    def _check(self, _attr, value):
        if not value:
            raise ValueError("clocks must list at least one clock")


class ClockDevice:
    clock = staticmethod(lambda: 0.0)

    def __init__(self, options: ClockOptions, context) -> None:
        self.options = options
        self.context = context
        self.names = [options.label]
        self.energy_sources = {options.label: "estimate"}
        self.max_power_w = 100.0

    def read_energy(self):
        return {self.options.label: 0.0}

    def supported_clocks(self):
        return list(self.options.clocks)

    def close(self):
        pass


def _no_driver(options, context):
    raise DeviceError("no driver on this machine")


plugin = types.ModuleType("zeus_test_open_device")


@hookimpl
def zeus_register_devices(register):
    register("clocky", ClockDevice, options=ClockOptions)
    register("absent", _no_driver)


plugin.zeus_register_devices = zeus_register_devices


@pytest.fixture
def reg():
    return zreg.load(extra_plugins=[("testdevices", plugin)], entry_points=False)


def test_opens_with_options_structured_like_a_device_table(reg, tmp_path):
    dev = open_device("clocky", {"clocks": [900, 600], "label": "gpu3"}, registry=reg)
    assert isinstance(dev, ClockDevice) and dev.names == ["gpu3"] and dev.supported_clocks() == [900, 600]
    assert isinstance(dev.context, BuildContext) and dev.context.job is None and dev.context.registry is reg
    assert dev.context.resolve_path("x.csv") == tmp_path / "x.csv"  # relative to the cwd (the test's tmp dir)
    assert open_device("clocky", registry=reg).supported_clocks() == [1410, 1005]  # defaults


def test_every_failure_says_what_and_how_to_fix(reg):
    with pytest.raises(DeviceOpenError, match="no device plugin named 'nope'; installed: absent, clocky"):
        open_device("nope", registry=reg)
    with pytest.raises(DeviceOpenError, match=r"clocky: unknown key 'clock'.*@ \$\.clocky\.clock"):
        open_device("clocky", {"clock": [1]}, registry=reg)  # a misspelt option, as in job.toml
    with pytest.raises(DeviceOpenError, match="clocks must list at least one clock"):
        open_device("clocky", {"clocks": []}, registry=reg)
    with pytest.raises(DeviceOpenError, match="device 'absent' cannot be opened: no driver on this machine"):
        open_device("absent", registry=reg)


def test_open_devices_collects_every_outcome(reg):
    from rich.console import Console

    opened, unavailable, errors = open_devices(reg, ["clocky", "absent"], {"clocky": {"label": "gpu1"}}, Console())
    assert [(n, g.names) for n, g in opened] == [("clocky", ["gpu1"])]
    assert unavailable == [("absent", "no driver on this machine")] and errors == []


def _open_in_child(make, out):
    try:
        out.put(make().names)
    except Exception as e:  # noqa: BLE001
        out.put(f"{type(e).__name__}: {e}")


def test_a_partial_of_it_builds_the_device_in_a_spawned_process():
    """What the Perseus controller and P2P job do: the device is named in the parent, opened in the child."""
    make = functools.partial(open_device, "nope-not-installed", {})
    assert pickle.loads(pickle.dumps(make)).args == ("nope-not-installed", {})
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    p = ctx.Process(target=_open_in_child, args=(make, out))
    p.start()
    got = out.get(timeout=120)
    p.join(30)
    # the child loads the installed plugins itself (entry points) and names them in the error
    assert got.startswith("DeviceOpenError: no device plugin named 'nope-not-installed'; installed: ") and "nvml" in got
