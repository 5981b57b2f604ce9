"""GFX clock locks on the simulated AMD driver (the device's ClockControl, what Perseus's plans lock):
a ceiling over the hardware range read before any lock, journaled, put back on close and after a
SIGKILL at the next zeus start, and refused with the fix without the privilege."""

from __future__ import annotations

import pytest

from zeus_core import DeviceError
from zeus_core.device import ClockControl
from zeus_core.journal import Journal, journal_path
from zeus_plugins_amdsmi import fake_amdsmi
from zeus_plugins_amdsmi.control import key_for
from zeus_plugins_amdsmi.device import AmdGpus
from zeus_plugins_amdsmi.fake_amdsmi import FakeAmdGpu
from zeus_plugins_amdsmi.options import AmdsmiOptions


def gpus() -> AmdGpus:
    return AmdGpus(AmdsmiOptions(counter_check_s=0.02))


def locks() -> list[list[int] | None]:
    return [g["sys_clock_lock_mhz"] for g in fake_amdsmi.read_state()["gpus"]]


def journal() -> list[tuple[str, str, object]]:
    with Journal(journal_path()) as j:
        return [(e.owner, e.key, e.original) for e in j.entries()]


def test_a_lock_is_a_ceiling_over_the_hardware_range_journaled_and_put_back(fake_amd):
    fake_amd([FakeAmdGpu(), FakeAmdGpu(sys_clock_range_mhz=[600, 1800])], privileged=True)
    with gpus() as dev:
        assert isinstance(dev, ClockControl)
        clocks = dev.supported_clocks()
        assert clocks[0] == 1800 and clocks[-1] == 615 and all(a - b == 15 for a, b in zip(clocks, clocks[1:]))  # both GPUs'
        assert dev.gpus[0].supported_clocks()[0] == 2100
        dev.lock_clocks(1500)
        assert locks() == [[500, 1500], [600, 1500]]  # each GPU's own floor, the plan's ceiling
        uuids = [g.uuid for g in dev.gpus]
        assert sorted(journal()) == sorted([("amdsmi", key_for(u, "locked_clocks"), r) for u, r in zip(uuids, ([500, 2100], [600, 1800]))])
        # amdsmi now reads back the lock, not the hardware: the clocks offered stay the hardware's
        assert dev.supported_clocks() == clocks
        dev.lock_clocks(1200)  # a second lock keeps the first original
        assert locks() == [[500, 1200], [600, 1200]] and len(journal()) == 2
        with pytest.raises(ValueError, match=r"1501 MHz is not a supported GFX clock of gpu0 .*nearest: 1485, 1500, 1515 MHz"):
            dev.lock_clocks(1501)
        dev.reset_clocks()
        assert locks() == [[500, 2100], [600, 1800]] and journal() == []
        dev.lock_clocks(900)
    assert locks() == [[500, 2100], [600, 1800]] and journal() == []  # close puts the range back
    history = fake_amdsmi.read_state()["gpus"][0]["clock_history"]
    assert history == [["sys", 500, 1500], ["sys", 500, 1200], ["sys", 500, 2100], ["sys", 500, 900], ["sys", 500, 2100]]


def test_without_the_privilege_a_lock_is_refused_with_the_fix_and_nothing_changes(fake_amd, monkeypatch):
    from zeus_core.devicekit import settings

    fake_amd(1, privileged=False)
    monkeypatch.setattr(settings, "has_capability", lambda bit: False)
    with gpus() as dev:
        with pytest.raises(DeviceError) as e:
            dev.lock_clocks(1500)
    msg = " ".join(str(e.value).split())
    assert "cannot lock the GFX clock to 500..1500 MHz of gpu0 (AMD Instinct MI300X" in msg and "AMDSMI_STATUS_NO_PERM" in msg
    assert "pp_od_clk_voltage" in msg and "zeus daemon" in msg
    assert locks() == [None] and journal() == []


def test_the_next_zeus_start_restores_the_clocks_a_sigkilled_process_locked(fake_amd, killed_then_restarted):
    fake_amd([FakeAmdGpu(sys_clock_lock_mhz=[700, 1900])], privileged=True)  # a lock that stood before: it comes back

    def left() -> None:
        assert locks() == [[700, 1305]]  # the floor of the range it read (the lock in force hides the hardware's)

    stderr = killed_then_restarted("lock_clocks(1305)", left)
    assert "restored amdsmi gpu:" in stderr and "locked_clocks to [700, 1900]" in stderr
    assert locks() == [[700, 1900]] and journal() == []
