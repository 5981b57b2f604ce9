"""Which plugin's GPUs ZeusMonitor measures: every candidate is tried, an absent library is passed over in
silence, a failure is said, two that open are an error until device= or $ZEUS_GPU_DEVICE names one."""

from __future__ import annotations

import time
import types
import warnings

import attrs
import pytest

from zeus_core import DeviceError, ZeusMonitor, hookimpl
from zeus_core.engine import registry as zreg
from zeus_core.engine.assembly import DeviceOpenError
from zeus_core.errors import DeviceAbsent
from zeus_core.inloop.monitor import GPU_DEVICE_ENV

OPENED: list = []


@attrs.define
class GpuOptions:
    gpus: list[int] | None = None


class Gpus:
    clock = staticmethod(time.monotonic)

    def __init__(self, vendor: str, options: GpuOptions) -> None:
        self.vendor = vendor
        self.names = [f"gpu{i}" for i in (options.gpus if options.gpus is not None else [0, 1])]
        self.energy_sources = dict.fromkeys(self.names, "counter")
        self.max_power_w = 300.0 * len(self.names)
        self.closed = False
        OPENED.append(self)

    def read_energy(self):
        return dict.fromkeys(self.names, 1.0)

    def close(self):
        self.closed = True


def registry(**behaviour):
    """A registry whose GPU plugins (name -> "opens", "absent" or "fails") behave as told."""
    plugin = types.ModuleType("zeus_test_gpu_choice")

    def factory(name, how):
        def make(options, context):
            if how == "absent":
                raise DeviceAbsent(f"no {name} library here")
            if how == "fails":
                raise DeviceError(f"the {name} driver is wedged")
            return Gpus(name, options)

        return make

    @hookimpl
    def zeus_register_devices(register):
        for name, how in behaviour.items():
            register(name, factory(name, how), options=GpuOptions, measures={"gpu": "gpus"})

    plugin.zeus_register_devices = zeus_register_devices
    return zreg.load(extra_plugins=[("gpuchoice", plugin)], entry_points=False)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    OPENED.clear()
    monkeypatch.delenv(GPU_DEVICE_ENV, raising=False)


def monitor(reg, **kw):
    return ZeusMonitor(cpu_indices=[], sync_execution_with="none", registry=reg, **kw)


def test_the_one_plugin_that_opens_wins_and_an_absent_one_is_silent():
    reg = registry(aaa="absent", zzz="opens")  # alphabetical order used to decide; now every one is tried
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # absence is no warning
        with monitor(reg, gpu_indices=[1]) as mon:
            assert [name for name, _, _ in mon.groups] == ["zzz"] and mon.gpu_indices == [1]
    with pytest.warns(UserWarning, match=r"opened no device: .*\(aaa: no aaa library here; zzz: no zzz library here\)"):
        mon = monitor(registry(aaa="absent", zzz="absent"))  # upstream: no GPU, no error; it says it measures nothing
    with mon:
        assert mon.gpu_indices == []
    with pytest.raises(DeviceOpenError, match=r"gpu_indices=\[0\]: no GPU could be opened \(aaa: no aaa library here; zzz: no zzz"):
        monitor(registry(aaa="absent", zzz="absent"), gpu_indices=[0])


def test_a_plugin_that_fails_is_said_even_when_no_gpu_was_asked_for():
    with pytest.warns(UserWarning) as said:
        with monitor(registry(aaa="absent", bbb="fails")) as mon:
            assert mon.gpu_indices == []
    assert [str(w.message).split(":")[0] for w in said] == [
        "no GPU is measured",
        "ZeusMonitor(gpu_indices=None, cpu_indices=[]) opened no device",
    ]
    assert "no GPU is measured: bbb: the bbb driver is wedged" in str(said[0].message)
    with pytest.raises(DeviceOpenError, match=r"no GPU could be opened \(bbb: the bbb driver is wedged; aaa: no aaa library"):
        monitor(registry(aaa="absent", bbb="fails"), gpu_indices=[0])


def test_two_plugins_that_open_are_an_error_until_one_is_named(monkeypatch):
    reg = registry(amd="opens", nv="opens")
    with pytest.raises(
        DeviceOpenError,
        match=r"GPUs of 2 device plugins open on this machine: amd \(gpu0\); nv \(gpu0\)\. .*"
        r'ZeusMonitor\(device="amd"\) or ZEUS_GPU_DEVICE=amd',
    ):
        monitor(reg, gpu_indices=[0])
    assert len(OPENED) == 2 and all(g.closed for g in OPENED)  # nothing left open
    monkeypatch.setenv(GPU_DEVICE_ENV, "nv")
    with monitor(reg) as mon:
        assert [name for name, _, _ in mon.groups] == ["nv"] and OPENED[-1].vendor == "nv"
    with monitor(reg, device="amd") as mon:  # device= needs no choice at all
        assert [name for name, _, _ in mon.groups] == ["amd"]
    monkeypatch.setenv(GPU_DEVICE_ENV, "intel")
    with pytest.raises(
        DeviceOpenError,
        match=r"ZEUS_GPU_DEVICE='intel' names no installed device plugin that measures GPUs; "
        r"installed: amd, nv",
    ):
        monitor(reg)
