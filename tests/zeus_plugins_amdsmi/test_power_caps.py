"""Power caps on the simulated AMD driver: set in microwatts, journaled, put back on close, after a
SIGKILL at the next zeus start, and refused with the fix without the privilege."""

from __future__ import annotations

import pytest

from zeus_core import DeviceError
from zeus_core.journal import Journal, journal_path
from zeus_plugins_amdsmi import fake_amdsmi
from zeus_plugins_amdsmi.control import key_for, restore_setting
from zeus_plugins_amdsmi.device import AmdGpus
from zeus_plugins_amdsmi.fake_amdsmi import FakeAmdGpu
from zeus_plugins_amdsmi.options import AmdsmiOptions


def gpus(**options) -> AmdGpus:
    return AmdGpus(AmdsmiOptions(counter_check_s=0.02, **options))


def caps() -> list[float]:
    return [g["cap_w"] for g in fake_amdsmi.read_state()["gpus"]]


def journal() -> list[tuple[str, str, object]]:
    with Journal(journal_path()) as j:
        return [(e.owner, e.key, e.original) for e in j.entries()]


def test_caps_are_set_in_microwatts_journaled_and_put_back(fake_amd):
    fake_amd([FakeAmdGpu(), FakeAmdGpu(min_cap_w=100.0, max_cap_w=500.0, default_cap_w=450.0)], privileged=True)
    with gpus() as dev:
        assert dev.power_limit_range() == (200.0, 500.0)  # the common range, in W
        assert dev.power_limits() == {"gpu0": 750.0, "gpu1": 450.0}
        dev.set_power_limit(312.5)
        assert caps() == [312.5, 312.5]
        uuids = [g.uuid for g in dev.gpus]
        assert sorted(journal()) == sorted([("amdsmi", key_for(u), c) for u, c in zip(uuids, (750_000_000, 450_000_000))])
        dev.set_power_limits({"gpu1": 150.0})  # per GPU, inside its own range
        assert dev.power_limits() == {"gpu0": 312.5, "gpu1": 150.0} and dev.control_paths == {"gpu0": "local", "gpu1": "local"}
        with pytest.raises(ValueError, match=r"outside their GPU's range: gpu1 600 W \(range 100 to 500 W\)$"):
            dev.set_power_limit(600.0)  # fine for gpu0, not for gpu1: neither is changed
        with pytest.raises(ValueError, match=r"gpu0 150 W \(range 200 to 750 W\); gpu1 99 W \(range 100 to 500 W\)"):
            dev.set_power_limits({"gpu0": 150.0, "gpu1": 99.0})
        assert dev.power_limits() == {"gpu0": 312.5, "gpu1": 150.0} and dev.power_limit() == pytest.approx(231.25)
    assert caps() == [750.0, 450.0] and journal() == []
    history = [g["cap_history_w"] for g in fake_amdsmi.read_state()["gpus"]]
    assert history == [[312.5, 750.0], [312.5, 150.0, 450.0]]


def test_without_the_privilege_a_cap_is_refused_with_the_fix_and_nothing_changes(fake_amd, monkeypatch):
    from zeus_core.devicekit import settings

    fake_amd(1, privileged=False)
    monkeypatch.setattr(settings, "has_capability", lambda bit: False)  # a training user's process, even under root CI
    with gpus() as dev:
        assert dev.control_paths == {"gpu0": "local, read-only"}  # no CAP_DAC_OVERRIDE, no daemon: zeus env says read-only
        with pytest.raises(DeviceError) as e:
            dev.set_power_limit(300.0)
        assert dev.control_paths == {"gpu0": "local, read-only"}
    msg = " ".join(str(e.value).split())
    assert "cannot set the power cap of gpu0 (AMD Instinct MI300X" in msg and "AMDSMI_STATUS_NO_PERM" in msg
    assert "zeus daemon" in msg and "ZEUS_DAEMON_SOCKET" in msg and '[power] plugin = "max"' in msg
    assert caps() == [750.0] and journal() == []


def test_the_restorer_in_the_same_process_leaves_the_devices_amdsmi_running(fake_amd):
    """amdsmi_init is one flag per process and one amdsmi_shut_down ends it for all: the restorer
    (which starts and stops amdsmi itself) must not pull the library from under an open device."""
    fake_amd(1, privileged=True)
    with gpus() as dev:
        dev.set_power_limit(400.0)
        restore_setting(key_for(dev.gpus[0].uuid), 500_000_000)
        assert caps() == [500.0]
        assert dev.read_energy()["gpu0"] >= 0 and dev.read_power()["gpu0"] > 0  # still initialised


def test_the_next_zeus_start_restores_the_cap_a_sigkilled_process_left(fake_amd, killed_then_restarted):
    fake_amd(1, privileged=True)

    def left() -> None:
        assert caps() == [250.0]

    stderr = killed_then_restarted("set_power_limit(250)", left)
    assert "restored amdsmi gpu:" in stderr and "power_cap to 750000000" in stderr
    assert caps() == [750.0] and journal() == []
